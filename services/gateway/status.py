"""Refusals as HTTP: the gRPC code's standard HTTP status, with the ``google.rpc.Status`` as body.

The mapping is the one documented on ``google.rpc.Code`` (and used by grpc-gateway and Envoy):
FAILED_PRECONDITION is 400, ABORTED and ALREADY_EXISTS are 409, RESOURCE_EXHAUSTED is 429.
The body is the Status the service sent, details included (``ErrorInfo`` with its reason), in the
proto3 JSON mapping: each detail carries its ``@type``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
from google.protobuf import any_pb2, json_format
from google.rpc import code_pb2, error_details_pb2, status_pb2

from shared.runtime.errors import ERROR_DOMAIN

HTTP_STATUS_OF_CODE: Mapping[int, int] = {
    code_pb2.OK: 200,
    code_pb2.CANCELLED: 499,
    code_pb2.UNKNOWN: 500,
    code_pb2.INVALID_ARGUMENT: 400,
    code_pb2.DEADLINE_EXCEEDED: 504,
    code_pb2.NOT_FOUND: 404,
    code_pb2.ALREADY_EXISTS: 409,
    code_pb2.PERMISSION_DENIED: 403,
    code_pb2.UNAUTHENTICATED: 401,
    code_pb2.RESOURCE_EXHAUSTED: 429,
    code_pb2.FAILED_PRECONDITION: 400,
    code_pb2.ABORTED: 409,
    code_pb2.OUT_OF_RANGE: 400,
    code_pb2.UNIMPLEMENTED: 501,
    code_pb2.INTERNAL: 500,
    code_pb2.UNAVAILABLE: 503,
    code_pb2.DATA_LOSS: 500,
}
_STATUS_DETAILS_KEY = "grpc-status-details-bin"

# Reasons of the gateway's own refusals (made before any gRPC call).
INVALID_JSON = "INVALID_JSON"
INVALID_PARAMETER = "INVALID_PARAMETER"
REQUEST_BODY_TOO_LARGE = "REQUEST_BODY_TOO_LARGE"
ROUTE_NOT_FOUND = "ROUTE_NOT_FOUND"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
PATH_AND_BODY_DISAGREE = "PATH_AND_BODY_DISAGREE"


def http_status(code: int) -> int:
    return HTTP_STATUS_OF_CODE.get(code, 500)


def status_json(status: status_pb2.Status) -> dict[str, Any]:
    """The Status in the proto3 JSON mapping (``code`` as a number, details with ``@type``)."""
    return json_format.MessageToDict(
        status, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def status_bytes(status: status_pb2.Status) -> bytes:
    return json.dumps(status_json(status), ensure_ascii=False).encode("utf-8")


# On HTTP the token travels in a header, not in gRPC metadata: the same refusal (code, reason,
# details unchanged) in the words of the protocol the caller used.
HTTP_WORDS: Mapping[str, str] = {
    "CREDENTIALS_MISSING": "the request needs an 'Authorization: Bearer <token>' header",
    "CREDENTIALS_MALFORMED": "the Authorization header must be 'Bearer <token>'",
}


def status_of_rpc_error(error: grpc.aio.AioRpcError) -> status_pb2.Status:
    """The rich Status the server attached, or a plain one built from the code and message."""
    code = error.code().value[0]
    trailing: Any = error.trailing_metadata() or ()
    for key, value in trailing:
        if key == _STATUS_DETAILS_KEY and isinstance(value, bytes):
            status = status_pb2.Status.FromString(value)
            if status.code == code:
                return _in_http_words(status)
    return status_pb2.Status(code=code, message=error.details() or "")


def _in_http_words(status: status_pb2.Status) -> status_pb2.Status:
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info) and info.reason in HTTP_WORDS:
            status.message = HTTP_WORDS[info.reason]
    return status


def _pack(detail: Any) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(detail)
    return packed


class GatewayRefusal(Exception):
    """A request the gateway refuses itself, before calling any service."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        http_status: int | None = None,
        metadata: Mapping[str, str] | None = None,
        field_violations: Sequence[tuple[str, str]] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.http_status = http_status if http_status is not None else HTTP_STATUS_OF_CODE[code]
        self.metadata = dict(metadata or {})
        self.field_violations = tuple(field_violations)
        self.headers = dict(headers or {})

    def status(self) -> status_pb2.Status:
        details = [
            _pack(
                error_details_pb2.ErrorInfo(
                    reason=self.reason, domain=ERROR_DOMAIN, metadata=self.metadata
                )
            )
        ]
        if self.field_violations:
            details.append(
                _pack(
                    error_details_pb2.BadRequest(
                        field_violations=[
                            error_details_pb2.BadRequest.FieldViolation(
                                field=field, description=description
                            )
                            for field, description in self.field_violations
                        ]
                    )
                )
            )
        return status_pb2.Status(code=self.code, message=self.message, details=details)


def invalid_json(message: str, field: str = "") -> GatewayRefusal:
    return GatewayRefusal(
        code_pb2.INVALID_ARGUMENT,
        INVALID_JSON,
        message,
        field_violations=[(field or "body", message)],
    )


def invalid_parameter(message: str, name: str) -> GatewayRefusal:
    return GatewayRefusal(
        code_pb2.INVALID_ARGUMENT,
        INVALID_PARAMETER,
        message,
        metadata={"parameter": name},
        field_violations=[(name, message)],
    )
