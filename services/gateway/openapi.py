"""The OpenAPI 3 document of the gateway, generated from the same route table it serves.

Schemas follow the proto3 JSON mapping with proto field names: 64-bit integers are strings,
enums are their value names, ``Timestamp`` is an RFC 3339 string, and every refusal is a
``google.rpc.Status``. ``python -m services.gateway.openapi PATH`` writes the document;
``--check`` fails when the checked-in copy drifted from the protos.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf import descriptor

from services.gateway.routes import Route, contract_routes

DEFAULT_OUTPUT = "docs/openapi.json"
STATUS_SCHEMA = "google.rpc.Status"
_F = descriptor.FieldDescriptor
_SCALARS: dict[int, dict[str, Any]] = {
    _F.TYPE_DOUBLE: {"type": "number", "format": "double"},
    _F.TYPE_FLOAT: {"type": "number", "format": "float"},
    _F.TYPE_INT32: {"type": "integer", "format": "int32"},
    _F.TYPE_SINT32: {"type": "integer", "format": "int32"},
    _F.TYPE_SFIXED32: {"type": "integer", "format": "int32"},
    _F.TYPE_UINT32: {"type": "integer", "format": "int64", "minimum": 0},
    _F.TYPE_FIXED32: {"type": "integer", "format": "int64", "minimum": 0},
    _F.TYPE_INT64: {"type": "string", "format": "int64"},
    _F.TYPE_SINT64: {"type": "string", "format": "int64"},
    _F.TYPE_SFIXED64: {"type": "string", "format": "int64"},
    _F.TYPE_UINT64: {"type": "string", "format": "uint64"},
    _F.TYPE_FIXED64: {"type": "string", "format": "uint64"},
    _F.TYPE_BOOL: {"type": "boolean"},
    _F.TYPE_STRING: {"type": "string"},
    _F.TYPE_BYTES: {"type": "string", "format": "byte"},
}
_WELL_KNOWN: dict[str, dict[str, Any]] = {
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Duration": {"type": "string", "pattern": "^-?[0-9]+(\\.[0-9]+)?s$"},
    "google.protobuf.Empty": {"type": "object"},
    "google.protobuf.Struct": {"type": "object", "additionalProperties": True},
    "google.protobuf.Value": {},
    "google.protobuf.Any": {
        "type": "object",
        "properties": {"@type": {"type": "string"}},
        "additionalProperties": True,
    },
}


class _Schemas:
    """components/schemas, filled with every message reachable from the routes."""

    def __init__(self) -> None:
        self.schemas: dict[str, Any] = {}

    def ref(self, message_type: descriptor.Descriptor) -> dict[str, Any]:
        if message_type.full_name in _WELL_KNOWN:
            return dict(_WELL_KNOWN[message_type.full_name])
        if message_type.full_name not in self.schemas:
            self.schemas[message_type.full_name] = {}  # placeholder: recursion ends here
            self.schemas[message_type.full_name] = {
                "type": "object",
                "properties": {f.name: self.field(f) for f in message_type.fields},
                "additionalProperties": False,
            }
        return {"$ref": f"#/components/schemas/{message_type.full_name}"}

    def value(self, field: descriptor.FieldDescriptor) -> dict[str, Any]:
        if field.message_type is not None:
            return self.ref(field.message_type)
        if field.enum_type is not None:
            return {"type": "string", "enum": [value.name for value in field.enum_type.values]}
        return dict(_SCALARS[field.type])

    def field(self, field: descriptor.FieldDescriptor) -> dict[str, Any]:
        message_type = field.message_type
        if message_type is not None and message_type.GetOptions().map_entry:
            value = message_type.fields_by_name["value"]
            return {"type": "object", "additionalProperties": self.value(value)}
        if field.is_repeated:
            return {"type": "array", "items": self.value(field)}
        return self.value(field)


def _query_fields(route: Route) -> list[descriptor.FieldDescriptor]:
    """Top-level scalar fields a GET-style route takes from the query string."""
    if route.body == "*":
        return []
    bound = {variable.split(".")[0] for variable in route.template.variables}
    return [
        field
        for field in route.method.input_type.fields
        if field.name not in bound and field.name != route.body and field.message_type is None
    ]


def _operation(route: Route, schemas: _Schemas) -> dict[str, Any]:
    request_type = route.method.input_type
    parameters: list[dict[str, Any]] = []
    for variable in route.template.variables:
        current: descriptor.Descriptor | None = request_type
        field = None
        for name in variable.split("."):
            assert current is not None
            field = current.fields_by_name[name]
            current = field.message_type
        assert field is not None
        parameters.append(
            {"name": variable, "in": "path", "required": True, "schema": schemas.field(field)}
        )
    for field in _query_fields(route):
        parameters.append({"name": field.name, "in": "query", "schema": schemas.field(field)})
    short_service = route.service.rsplit(".", 1)[-1]
    operation: dict[str, Any] = {
        "operationId": f"{short_service}_{route.method.name}",
        "tags": [short_service],
        "summary": f"{route.service}/{route.method.name}",
    }
    if parameters:
        operation["parameters"] = parameters
    if route.body:
        body_schema = (
            schemas.ref(request_type)
            if route.body == "*"
            else schemas.field(request_type.fields_by_name[route.body])
        )
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": body_schema}},
        }
    reply = schemas.ref(route.method.output_type)
    if route.response_body:
        reply = schemas.field(route.method.output_type.fields_by_name[route.response_body])
    media = "application/x-ndjson" if route.server_streaming else "application/json"
    description = "one JSON message a line" if route.server_streaming else "OK"
    operation["responses"] = {
        "200": {"description": description, "content": {media: {"schema": reply}}},
        "default": {
            "description": "a refusal: the google.rpc.Status, at the gRPC code's HTTP status",
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{STATUS_SCHEMA}"}}
            },
        },
    }
    return operation


def openapi_document(routes: Sequence[Route]) -> dict[str, Any]:
    schemas = _Schemas()
    paths: dict[str, dict[str, Any]] = {}
    for route in sorted(routes, key=lambda r: (r.template.openapi_path, r.http_method)):
        paths.setdefault(route.template.openapi_path, {})[route.http_method.lower()] = _operation(
            route, schemas
        )
    schemas.schemas[STATUS_SCHEMA] = {
        "type": "object",
        "properties": {
            "code": {"type": "integer", "format": "int32"},
            "message": {"type": "string"},
            "details": {"type": "array", "items": _WELL_KNOWN["google.protobuf.Any"]},
        },
    }
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Forge continuity HTTP gateway",
            "version": "v1",
            "description": (
                "JSON over HTTP for the forge.continuity.v1 gRPC services, generated from their "
                "google.api.http annotations. Field names are the proto field names."
            ),
        },
        "servers": [{"url": "http://127.0.0.1:8080"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": dict(sorted(schemas.schemas.items())),
        },
    }


def document_text() -> str:
    return json.dumps(openapi_document(contract_routes()), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.gateway.openapi")
    parser.add_argument("path", nargs="?", default=DEFAULT_OUTPUT)
    parser.add_argument("--check", action="store_true", help="fail if the file drifted")
    args = parser.parse_args(argv)
    path = Path(args.path)
    text = document_text()
    if args.check:
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            print(f"{path} drifted from protos/: run 'make openapi' and commit", file=sys.stderr)
            return 1
        print(f"{path} matches protos/")
        return 0
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
