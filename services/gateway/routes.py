"""The HTTP route table, read from the ``google.api.http`` annotations of the generated descriptors.

No route is written by hand: every RPC of the ``forge.continuity.v1`` services that carries an
http rule becomes a :class:`Route`, with its path template compiled per the ``google.api.http``
grammar (``{field}``, ``{field.sub}``, ``{field=segments/*}``, ``*``, ``**`` and a ``:verb``
suffix). Each route goes to the gRPC server that hosts its service, as the service's
``hosted_by`` option declares it (shared.contract.method_facts).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from google.api import annotations_pb2, http_pb2
from google.protobuf import descriptor, message, message_factory

from shared.contract.method_facts import hosted_by
from shared.contract.modules import CONTRACT_MODULES

_HTTP_METHODS = ("get", "put", "post", "delete", "patch")
_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)(?:=([^}]*))?\}")


class TemplateError(ValueError):
    """An http rule whose path template this gateway cannot serve."""


@dataclass(frozen=True)
class PathTemplate:
    """A compiled ``google.api.http`` path template."""

    text: str
    pattern: re.Pattern[str]
    variables: tuple[str, ...]  # field paths, in the order of the pattern's groups

    @property
    def literal_weight(self) -> int:
        """Characters outside variables: a more literal template is tried first."""
        return len(_VARIABLE.sub("", self.text))

    def match(self, raw_path: str) -> dict[str, str] | None:
        """Field path -> percent-decoded value, or None. Matching runs on the raw (still
        percent-encoded) path so an encoded ``/`` inside a value stays inside that value."""
        found = self.pattern.fullmatch(raw_path)
        if found is None:
            return None
        return {
            variable: unquote(found.group(f"v{index}"))
            for index, variable in enumerate(self.variables)
        }

    @property
    def openapi_path(self) -> str:
        """The template with each variable written ``{field}``, as OpenAPI paths are."""
        return _VARIABLE.sub(lambda m: "{" + m[1] + "}", self.text)


def _segment_pattern(segments: str) -> str:
    parts = []
    for segment in segments.split("/"):
        if segment == "**":
            parts.append(".+")
        elif segment == "*":
            parts.append("[^/]+")
        else:
            parts.append(re.escape(segment))
    return "/".join(parts)


def compile_template(text: str) -> PathTemplate:
    if not text.startswith("/"):
        raise TemplateError(f"path template {text!r} must start with '/'")
    pattern = ""
    variables: list[str] = []
    position = 0
    for found in _VARIABLE.finditer(text):
        pattern += _segment_pattern(text[position : found.start()])
        inner = _segment_pattern(found[2]) if found[2] else "[^/]+"
        pattern += f"(?P<v{len(variables)}>{inner})"
        variables.append(found[1])
        position = found.end()
    tail = text[position:]
    if "{" in tail or "}" in tail:
        raise TemplateError(f"path template {text!r} has an unbalanced brace")
    pattern += _segment_pattern(tail)
    return PathTemplate(text, re.compile(pattern), tuple(variables))


@dataclass(frozen=True)
class Route:
    """One annotated RPC, as the gateway serves it."""

    http_method: str  # upper case
    template: PathTemplate
    body: str  # "" (no body), "*" (the whole request) or a top-level field name
    response_body: str
    service: str  # full service name
    method: descriptor.MethodDescriptor
    server: str  # shared.runtime.config service name of the hosting gRPC server

    @property
    def grpc_path(self) -> str:
        return f"/{self.service}/{self.method.name}"

    @property
    def server_streaming(self) -> bool:
        return bool(self.method.server_streaming)

    @property
    def request_class(self) -> type[message.Message]:
        return message_factory.GetMessageClass(self.method.input_type)

    @property
    def response_class(self) -> type[message.Message]:
        return message_factory.GetMessageClass(self.method.output_type)


def _rules(rule: http_pb2.HttpRule) -> Iterable[http_pb2.HttpRule]:
    yield rule
    yield from rule.additional_bindings


def _method_and_path(rule: http_pb2.HttpRule) -> tuple[str, str]:
    pattern = rule.WhichOneof("pattern")
    if pattern in _HTTP_METHODS:
        return pattern.upper(), str(getattr(rule, pattern))
    if pattern == "custom":
        return rule.custom.kind.upper(), rule.custom.path
    raise TemplateError(f"http rule without a path: {rule}")


def _check_binding(
    method: descriptor.MethodDescriptor, route_body: str, fields: Sequence[str]
) -> None:
    request = method.input_type
    for path in fields:
        current: descriptor.Descriptor | None = request
        for name in path.split("."):
            field = current.fields_by_name.get(name) if current else None
            if field is None:
                raise TemplateError(f"{method.full_name}: path variable {path!r} is not a field")
            current = field.message_type
    if route_body not in ("", "*") and route_body not in request.fields_by_name:
        raise TemplateError(f"{method.full_name}: body {route_body!r} is not a field")


def routes_of(services: Iterable[descriptor.ServiceDescriptor]) -> list[Route]:
    """Every http binding of every method of ``services``, most literal template first."""
    table: list[Route] = []
    for service in services:
        for method in service.methods:
            options = method.GetOptions()
            if not options.HasExtension(annotations_pb2.http):
                continue
            server = hosted_by(service)
            for rule in _rules(options.Extensions[annotations_pb2.http]):
                http_method, path = _method_and_path(rule)
                template = compile_template(path)
                _check_binding(method, rule.body, template.variables)
                table.append(
                    Route(
                        http_method=http_method,
                        template=template,
                        body=rule.body,
                        response_body=rule.response_body,
                        service=service.full_name,
                        method=method,
                        server=server,
                    )
                )
    table.sort(key=lambda route: -route.template.literal_weight)
    return table


def contract_services() -> list[descriptor.ServiceDescriptor]:
    """The services of the generated contracts, in a stable order."""
    return [
        service
        for module in CONTRACT_MODULES
        for service in module.DESCRIPTOR.services_by_name.values()
    ]


def contract_routes() -> list[Route]:
    return routes_of(contract_services())


@dataclass(frozen=True)
class Match:
    route: Route
    variables: dict[str, str]


class RouteTable:
    """Finds the route for an HTTP method and raw path."""

    def __init__(self, routes: Sequence[Route]) -> None:
        self.routes = tuple(routes)

    def find(self, http_method: str, raw_path: str) -> Match | tuple[str, ...]:
        """The match, or the methods the path allows (empty: no route has this path)."""
        allowed: list[str] = []
        for route in self.routes:
            variables = route.template.match(raw_path)
            if variables is None:
                continue
            if route.http_method == http_method:
                return Match(route, variables)
            allowed.append(route.http_method)
        return tuple(sorted(set(allowed)))
