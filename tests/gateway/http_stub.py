"""A gRPC-stub look-alike that speaks HTTP/JSON to the gateway.

``HttpStub(client, "forge.continuity.v1.LedgerService").CreateRun(request)`` builds the HTTP
request from the method's own http rule (path variables filled from the request, the body or the
query string per the rule), sends it with httpx2, and parses the JSON reply into the response
message. Code written against gRPC stubs (the demo's seeding) therefore runs over HTTP unchanged.
Every route used is recorded in ``exercised``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx2
from google.protobuf import json_format, message

from services.gateway.routes import Route, contract_routes

ROUTES = contract_routes()
exercised: set[tuple[str, str]] = set()


class HttpRefused(Exception):
    """A non-2xx answer: the HTTP status and the google.rpc.Status body."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body

    @property
    def reason(self) -> str:
        for detail in self.body.get("details", []):
            if detail["@type"].endswith("google.rpc.ErrorInfo"):
                return str(detail["reason"])
        return ""


def route_of(service: str, method: str) -> Route:
    [route] = [r for r in ROUTES if r.service == service and r.method.name == method]
    return route


def _value(request: message.Message, path: str) -> str:
    current: Any = request
    for name in path.split("."):
        current = getattr(current, name)
    return str(current).lower() if isinstance(current, bool) else str(current)


def http_request(route: Route, request: message.Message) -> tuple[str, str, dict[str, Any]]:
    """(method, url path, httpx keyword arguments) for ``request`` on ``route``."""
    path = route.template.openapi_path
    for variable in route.template.variables:
        path = path.replace("{" + variable + "}", quote(_value(request, variable), safe=""))
    document = json_format.MessageToDict(request, preserving_proto_field_name=True)
    bound = {variable.split(".")[0] for variable in route.template.variables}
    if route.body == "*":
        return route.http_method, path, {"json": document}
    if route.body:
        return route.http_method, path, {"json": document.get(route.body, {})}
    query = [
        (name, str(item).lower() if isinstance(item, bool) else str(item))
        for name, value in document.items()
        if name not in bound
        for item in (value if isinstance(value, list) else [value])
    ]
    return route.http_method, path, {"params": query}


class HttpStub:
    def __init__(self, client: httpx2.Client, service: str) -> None:
        self._client = client
        self._service = service

    def __getattr__(self, method: str) -> Callable[..., Any]:
        route = route_of(self._service, method)

        def call(request: message.Message, **_ignored: Any) -> Any:
            verb, path, arguments = http_request(route, request)
            exercised.add((route.http_method, route.template.text))
            if route.server_streaming:
                return self._stream(route, verb, path, arguments)
            reply = self._client.request(verb, path, **arguments)
            if reply.status_code != 200:
                raise HttpRefused(reply.status_code, reply.json())
            assert reply.headers["content-type"].startswith("application/json")
            return json_format.ParseDict(reply.json(), route.response_class())

        return call

    def _stream(
        self, route: Route, verb: str, path: str, arguments: dict[str, Any]
    ) -> Iterator[message.Message]:
        with self._client.stream(verb, path, **arguments) as reply:
            if reply.status_code != 200:
                reply.read()
                raise HttpRefused(reply.status_code, reply.json())
            assert reply.headers["content-type"].startswith("application/x-ndjson")
            replies = [
                json_format.Parse(line, route.response_class())
                for line in reply.iter_lines()
                if line
            ]
        return iter(replies)
