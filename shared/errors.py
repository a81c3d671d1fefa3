"""Domain errors and their one mapping to rich gRPC statuses.

Domain code raises :class:`DomainError` subclasses (no grpc imports needed there). The server
bootstrap's interceptor turns each into a ``google.rpc.Status`` carrying exactly one ``ErrorInfo``
(stable UPPER_SNAKE ``reason``, domain ``continuity.forge``), plus ``BadRequest`` or
``PreconditionFailure`` details where they fit. Clients turn a rich status back into the same
exception type with :func:`from_rpc_error`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

ERROR_DOMAIN = "continuity.forge"
_REASON_PATTERN = re.compile(r"^[A-Z][A-Z0-9_]*[A-Z0-9]$")


class ErrorKind(enum.Enum):
    """The gRPC code family of a domain error."""

    INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT
    NOT_FOUND = grpc.StatusCode.NOT_FOUND
    ALREADY_EXISTS = grpc.StatusCode.ALREADY_EXISTS
    FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
    ABORTED = grpc.StatusCode.ABORTED
    RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
    PERMISSION_DENIED = grpc.StatusCode.PERMISSION_DENIED
    UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
    UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED
    UNAVAILABLE = grpc.StatusCode.UNAVAILABLE
    DEADLINE_EXCEEDED = grpc.StatusCode.DEADLINE_EXCEEDED
    INTERNAL = grpc.StatusCode.INTERNAL


@dataclass(frozen=True)
class FieldViolation:
    """One bad request field (maps to ``BadRequest.FieldViolation``)."""

    field: str
    description: str


@dataclass(frozen=True)
class PreconditionViolation:
    """One failed precondition (maps to ``PreconditionFailure.Violation``)."""

    type: str
    subject: str
    description: str


class DomainError(Exception):
    """A refusal with a stable machine-readable reason. Base of every error the services return."""

    kind: ClassVar[ErrorKind] = ErrorKind.FAILED_PRECONDITION

    def __init__(
        self,
        reason: str,
        message: str,
        *,
        metadata: Mapping[str, str] | None = None,
        field_violations: Sequence[FieldViolation] = (),
        precondition_violations: Sequence[PreconditionViolation] = (),
    ) -> None:
        if not _REASON_PATTERN.match(reason):
            raise ValueError(f"error reason must be UPPER_SNAKE, got {reason!r}")
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.metadata: dict[str, str] = dict(metadata or {})
        self.field_violations = tuple(field_violations)
        self.precondition_violations = tuple(precondition_violations)

    def __str__(self) -> str:
        return f"{self.kind.name} {self.reason}: {self.message}"


class InvalidArgument(DomainError):
    """Malformed input; nothing was written."""

    kind = ErrorKind.INVALID_ARGUMENT


class NotFound(DomainError):
    """The named resource does not exist."""

    kind = ErrorKind.NOT_FOUND


class Conflict(DomainError):
    """The identifier is taken by different content (idempotency conflict)."""

    kind = ErrorKind.ALREADY_EXISTS


class FailedPrecondition(DomainError):
    """The system is not in a state that allows the operation (held, stale digest, disabled)."""

    kind = ErrorKind.FAILED_PRECONDITION


class Aborted(DomainError):
    """A concurrency check failed (stale head, stale revision); re-read and retry."""

    kind = ErrorKind.ABORTED


class ResourceExhausted(DomainError):
    """A cap or limit is reached (queue counts, command limit, message size)."""

    kind = ErrorKind.RESOURCE_EXHAUSTED


class PermissionDenied(DomainError):
    """A known identity lacks the role."""

    kind = ErrorKind.PERMISSION_DENIED


class Unauthenticated(DomainError):
    """Missing or unknown credentials."""

    kind = ErrorKind.UNAUTHENTICATED


class Unimplemented(DomainError):
    """The RPC is part of the contract but not delivered yet."""

    kind = ErrorKind.UNIMPLEMENTED


class Unavailable(DomainError):
    """A dependency is unreachable; safe to retry."""

    kind = ErrorKind.UNAVAILABLE


class Internal(DomainError):
    """An invariant broke inside the service."""

    kind = ErrorKind.INTERNAL


_BY_KIND: dict[ErrorKind, type[DomainError]] = {
    cls.kind: cls
    for cls in (
        InvalidArgument,
        NotFound,
        Conflict,
        FailedPrecondition,
        Aborted,
        ResourceExhausted,
        PermissionDenied,
        Unauthenticated,
        Unimplemented,
        Unavailable,
        Internal,
    )
}


def _pack(message: object) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)  # type: ignore[arg-type]
    return packed


def to_status(error: DomainError) -> grpc.Status:
    """The rich gRPC status for a domain error: exactly one ErrorInfo, plus BadRequest /
    PreconditionFailure when the error names fields or preconditions."""
    details = [
        _pack(
            error_details_pb2.ErrorInfo(
                reason=error.reason, domain=ERROR_DOMAIN, metadata=dict(error.metadata)
            )
        )
    ]
    if error.field_violations:
        details.append(
            _pack(
                error_details_pb2.BadRequest(
                    field_violations=[
                        error_details_pb2.BadRequest.FieldViolation(
                            field=v.field, description=v.description
                        )
                        for v in error.field_violations
                    ]
                )
            )
        )
    if error.precondition_violations:
        details.append(
            _pack(
                error_details_pb2.PreconditionFailure(
                    violations=[
                        error_details_pb2.PreconditionFailure.Violation(
                            type=v.type, subject=v.subject, description=v.description
                        )
                        for v in error.precondition_violations
                    ]
                )
            )
        )
    status = status_pb2.Status(
        code=getattr(code_pb2, error.kind.name), message=error.message, details=details
    )
    return rpc_status.to_status(status)


def from_rpc_error(error: grpc.RpcError) -> DomainError:
    """Rebuild the typed domain error from a rich status (for clients and service-to-service
    calls). A status without ErrorInfo becomes a generic error named after its code."""
    code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
    message = error.details() if isinstance(error, grpc.Call) else str(error)
    status = rpc_status.from_call(error) if isinstance(error, grpc.Call) else None
    reason = code.name if code is not None else "UNKNOWN"
    metadata: dict[str, str] = {}
    fields: list[FieldViolation] = []
    preconditions: list[PreconditionViolation] = []
    if status is not None:
        message = status.message
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                reason, metadata = info.reason, dict(info.metadata)
            elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                fields = [FieldViolation(v.field, v.description) for v in bad.field_violations]
            elif detail.Is(error_details_pb2.PreconditionFailure.DESCRIPTOR):
                failure = error_details_pb2.PreconditionFailure()
                detail.Unpack(failure)
                preconditions = [
                    PreconditionViolation(v.type, v.subject, v.description)
                    for v in failure.violations
                ]
    kind = next((k for k in ErrorKind if k.value == code), ErrorKind.INTERNAL)
    cls = _BY_KIND.get(kind, Internal)
    if not _REASON_PATTERN.match(reason):
        reason = "UNKNOWN_ERROR"
    return cls(
        reason=reason,
        message=message or "",
        metadata=metadata,
        field_violations=fields,
        precondition_violations=preconditions,
    )
