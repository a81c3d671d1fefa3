"""HTTP request -> gRPC request message, and gRPC message -> JSON, per the route's http rule.

The request message is assembled as one proto3-JSON object (body, then path variables, then query
parameters) and parsed once with ``json_format.ParseDict(ignore_unknown_fields=False)``: unknown
fields, wrong types and a string where a Boolean is required are refused exactly as the proto3
JSON mapping refuses them. Field names may be given as proto names (``run_id``) or JSON names
(``runId``); responses use the proto names, as the spec does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf import descriptor, json_format, message
from google.rpc import code_pb2

from services.gateway.routes import Route
from services.gateway.status import (
    PATH_AND_BODY_DISAGREE,
    GatewayRefusal,
    invalid_json,
    invalid_parameter,
)

_BOOL = descriptor.FieldDescriptor.TYPE_BOOL
_ENUM = descriptor.FieldDescriptor.TYPE_ENUM


def _field(message_type: descriptor.Descriptor, name: str) -> descriptor.FieldDescriptor | None:
    found = message_type.fields_by_name.get(name)
    if found is not None:
        return found
    return next((f for f in message_type.fields if f.json_name == name), None)


def _is_repeated(field: descriptor.FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def _resolve(
    message_type: descriptor.Descriptor, path: str
) -> list[descriptor.FieldDescriptor] | None:
    """The fields along a dotted path (proto or JSON names), or None if one does not exist."""
    fields = []
    current: descriptor.Descriptor | None = message_type
    for name in path.split("."):
        field = _field(current, name) if current is not None else None
        if field is None:
            return None
        fields.append(field)
        current = field.message_type
    return fields


def _enum_name(field: descriptor.FieldDescriptor, text: str) -> str:
    """An enum value's full name from its short name in any case (``queued`` or ``QUEUED`` for
    ``EXECUTION_REQUEST_STATE_QUEUED``); anything else is left for json_format to judge."""
    enum_type = field.enum_type
    if enum_type is None or text in enum_type.values_by_name:
        return text
    names = list(enum_type.values_by_name)
    prefix = names[0].removesuffix("UNSPECIFIED") if names[0].endswith("_UNSPECIFIED") else ""
    full = prefix + text.upper()
    return full if full in enum_type.values_by_name and not full.endswith("_UNSPECIFIED") else text


def _scalar(field: descriptor.FieldDescriptor, text: str, where: str) -> Any:
    """A path or query string as the JSON value the field's mapping expects: query strings are
    always text, so only a Boolean needs converting (numbers and timestamps parse from strings)
    and an enum's short name completing (``states=QUEUED``)."""
    if field.type == _ENUM:
        return _enum_name(field, text)
    if field.type != _BOOL:
        return text
    if text in ("true", "false"):
        return text == "true"
    raise invalid_parameter(f"{where}: expected true or false, got {text!r}", where)


def _query_fields(route: Route, name: str, taken: set[str]) -> list[descriptor.FieldDescriptor]:
    """The field a query parameter sets: a known field path, through no repeated field, and not
    one the path or the body already carries."""
    fields = _resolve(route.method.input_type, name)
    if fields is None or any(_is_repeated(f) for f in fields[:-1]):
        raise invalid_parameter(f"unknown query parameter {name!r}", name)
    if fields[0].name in taken:
        raise invalid_parameter(
            f"query parameter {name!r} sets a field the path or the body carries", name
        )
    return fields


def _place(
    document: dict[str, Any], fields: Sequence[descriptor.FieldDescriptor], value: Any
) -> Any:
    """Set ``value`` at the field path in ``document`` (by proto names); return what was there."""
    target = document
    for field in fields[:-1]:
        nested = target.get(field.name)
        if nested is None:
            nested = target.pop(field.json_name, None) or {}
        if not isinstance(nested, dict):
            raise invalid_json(f"{field.name}: expected an object", field.name)
        target[field.name] = nested
        target = nested
    leaf = fields[-1]
    previous = target.pop(leaf.json_name, None) if leaf.json_name != leaf.name else None
    previous = target.get(leaf.name, previous)
    target[leaf.name] = value
    return previous


def decode_body(raw: bytes) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise invalid_json(f"the request body is not JSON: {error}") from None


def request_message(
    route: Route,
    variables: Mapping[str, str],
    query: Sequence[tuple[str, str]],
    body: Any,
) -> message.Message:
    """The gRPC request for ``route`` from its path variables, query parameters and decoded body."""
    request_type = route.method.input_type
    document: dict[str, Any] = {}
    if route.body == "*":
        if body is not None and not isinstance(body, dict):
            raise invalid_json("the request body must be a JSON object")
        document = dict(body or {})
    elif route.body and body is not None:
        document[route.body] = body
    for path, text in variables.items():
        fields = _resolve(request_type, path)
        assert fields is not None  # checked when the route table was built
        value = _scalar(fields[-1], text, path)
        previous = _place(document, fields, value)
        if previous is not None and previous != value:
            raise GatewayRefusal(
                code_pb2.INVALID_ARGUMENT,
                PATH_AND_BODY_DISAGREE,
                f"{path} is {text!r} in the path but {previous!r} in the body",
                metadata={"field": path},
                field_violations=[(path, "differs between the path and the body")],
            )
    if query and route.body == "*":
        names = sorted({name for name, _ in query})
        raise invalid_parameter(
            f"query parameters {names} are not accepted: the body carries the whole request",
            names[0],
        )
    taken = {path.split(".")[0] for path in variables} | ({route.body} if route.body else set())
    repeated: dict[str, list[Any]] = {}
    for name, text in query:
        fields = _query_fields(route, name, taken)
        value = _scalar(fields[-1], text, name)
        if _is_repeated(fields[-1]):
            key = ".".join(field.name for field in fields)
            repeated.setdefault(key, []).append(value)
            _place(document, fields, repeated[key])
        elif _place(document, fields, value) is not None:
            raise invalid_parameter(f"query parameter {name!r} is given twice", name)
    _refuse_unknown_fields(document, request_type)
    request = route.request_class()
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=False)
    except json_format.ParseError as error:
        raise invalid_json(str(error)) from None
    return request


def _refuse_unknown_fields(
    document: Any, message_type: descriptor.Descriptor, at: str = ""
) -> None:
    """Refuse the first unknown field before parsing, naming the fields the message has by their
    proto (snake_case) names as the documentation does; json_format would list JSON names."""
    if not isinstance(document, dict) or message_type.full_name.startswith("google.protobuf."):
        return  # a wrong type, or a well-known type's own JSON form: json_format judges it
    for key, value in document.items():
        field = _field(message_type, key) if isinstance(key, str) else None
        path = f"{at}.{key}" if at else str(key)
        if field is None:
            known = ", ".join(f.name for f in message_type.fields)
            raise invalid_json(
                f"unknown field {key!r} in {at or 'the request'} ({message_type.name}); "
                f"known fields: {known}",
                path,
            )
        nested = field.message_type
        if nested is None or nested.GetOptions().map_entry:
            continue
        for item in value if _is_repeated(field) and isinstance(value, list) else [value]:
            _refuse_unknown_fields(item, nested, path)


def message_json(reply: message.Message, response_body: str = "") -> Any:
    """The reply (or its ``response_body`` field) in the proto3 JSON mapping, proto field names,
    every field present (``false`` and ``0`` included, as an HTTP client expects a stable shape)."""
    document = json_format.MessageToDict(
        reply, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    if response_body:
        return document.get(response_body)
    return document


def message_bytes(reply: message.Message, response_body: str = "") -> bytes:
    return json.dumps(message_json(reply, response_body), ensure_ascii=False).encode("utf-8")
