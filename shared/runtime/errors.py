"""Domain errors and their one mapping to rich gRPC statuses.

Domain code raises :class:`DomainError` subclasses (no grpc imports needed there). The server
bootstrap's interceptor turns each into a ``google.rpc.Status`` carrying exactly one ``ErrorInfo``
(stable UPPER_SNAKE ``reason``, domain ``continuity.forge``), plus ``BadRequest`` or
``PreconditionFailure`` details where they fit, and any contract messages the refusal carries
(``forge.continuity.v1.HandoffPayload`` for a refusal of the admissibility check, and for every
refusal by the state of a continuation action: :class:`RefusalDetail`, ADR 0046). Clients turn a
rich status back into the same exception type with :func:`from_rpc_error`. Every reason is
listed, with its code, metadata keys and meaning, in :mod:`shared.runtime.reasons`.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import ClassVar, Generic, TypeVar

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

log = logging.getLogger("forge.client")

ERROR_DOMAIN = "continuity.forge"
# Details of these packages are passed on from a downstream status (a service relaying a
# refusal keeps them); any other unrecognized detail is dropped.
_CONTRACT_TYPE_PREFIX = "type.googleapis.com/forge.continuity."
_REASON_PATTERN = re.compile(r"\A[A-Z][A-Z0-9_]*[A-Z0-9]\Z")  # \Z: "$" allows a final newline
M = TypeVar("M", bound=Message)


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
    CANCELLED = grpc.StatusCode.CANCELLED
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
        details: Sequence[Message] = (),
    ) -> None:
        if not _REASON_PATTERN.match(reason):
            raise ValueError(f"error reason must be UPPER_SNAKE, got {reason!r}")
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.metadata: dict[str, str] = dict(metadata or {})
        self.field_violations = tuple(field_violations)
        self.precondition_violations = tuple(precondition_violations)
        # Contract messages carried as further status details (packed ``Any`` when relayed).
        self.details: tuple[Message, ...] = tuple(details)

    def detail(self, message_type: type[M]) -> M | None:
        """The carried detail of ``message_type`` (e.g. the handoff of a refused action)."""
        for carried in self.details:
            if isinstance(carried, message_type):
                return carried
            if isinstance(carried, any_pb2.Any) and carried.TypeName() == (
                message_type.DESCRIPTOR.full_name
            ):
                unpacked = message_type()
                carried.Unpack(unpacked)
                return unpacked
        return None

    def __str__(self) -> str:
        return f"{self.kind.name} {self.reason}: {self.message}"

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled as what it carries (a refusal crosses from a worker process whole)."""
        return (
            _rebuild,
            (
                type(self),
                self.reason,
                self.message,
                self.metadata,
                self.field_violations,
                self.precondition_violations,
                self.details,
            ),
        )


def _rebuild(
    kind: type[DomainError],
    reason: str,
    message: str,
    metadata: Mapping[str, str],
    field_violations: Sequence[FieldViolation],
    precondition_violations: Sequence[PreconditionViolation],
    details: Sequence[Message],
) -> DomainError:
    return kind(
        reason,
        message,
        metadata=metadata,
        field_violations=field_violations,
        precondition_violations=precondition_violations,
        details=details,
    )


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


class DeadlineExceeded(DomainError):
    """A call did not finish before its deadline."""

    kind = ErrorKind.DEADLINE_EXCEEDED


class Cancelled(DomainError):
    """A call was cancelled before it finished."""

    kind = ErrorKind.CANCELLED


class Internal(DomainError):
    """An invariant broke inside the service."""

    kind = ErrorKind.INTERNAL


#: Refusals by the state an action met (not malformed input, an unknown name, missing credentials
#: or an unreachable dependency): the ones whose status says what the state permits next.
STATE_REFUSALS = frozenset(
    {
        ErrorKind.FAILED_PRECONDITION,
        ErrorKind.ABORTED,
        ErrorKind.ALREADY_EXISTS,
        ErrorKind.PERMISSION_DENIED,
        ErrorKind.RESOURCE_EXHAUSTED,
    }
)


class RefusalDetail(Generic[M]):
    """Around one action whose every refusal by the state carries one more status detail of
    ``message_type`` (the handoff of spec 001, ADR 0046), read by ``read`` only when the action
    is refused: the success path never calls it. A refusal already carrying such a detail (the
    admissibility check's own) keeps it; ``read`` answering None adds nothing. A class, not a
    generator-based context manager, which costs the success path a few microseconds more::

        with RefusalDetail(HandoffPayload, lambda refused: handoff_of(refused, bound)):
            return transaction()
    """

    __slots__ = ("_message_type", "_read")

    def __init__(self, message_type: type[M], read: Callable[[DomainError], M | None]) -> None:
        self._message_type, self._read = message_type, read

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        _trace: TracebackType | None,
    ) -> None:
        if (
            isinstance(error, DomainError)
            and error.kind in STATE_REFUSALS
            and error.detail(self._message_type) is None
        ):
            try:
                found = self._read(error)
            except Exception:  # noqa: BLE001 - the refusal travels on; only its detail is lost
                log.warning("the %s detail of %s could not be read", self._message_type, error)
                return
            if found is not None:
                error.details += (found,)


def field_required(field: str, message: str = "") -> InvalidArgument:
    """INVALID_ARGUMENT FIELD_REQUIRED: the request left ``field`` empty (the one form every
    service answers; ``message`` only when a plainer sentence says more)."""
    return InvalidArgument(
        "FIELD_REQUIRED",
        message or f"{field} is required",
        metadata={"field": field},
        field_violations=[FieldViolation(field, "required")],
    )


def exhausted_for_now(
    reason: str, message: str, *, limit: int, retry_after_ms: int
) -> ResourceExhausted:
    """RESOURCE_EXHAUSTED ``reason`` for a bound that frees as other work ends: metadata
    ``limit`` and ``retry_after_ms``, and a RetryInfo detail asking for that delay."""
    delay = duration_pb2.Duration()
    delay.FromMilliseconds(retry_after_ms)
    return ResourceExhausted(
        reason,
        message,
        metadata={"limit": str(limit), "retry_after_ms": str(retry_after_ms)},
        details=(error_details_pb2.RetryInfo(retry_delay=delay),),
    )


def field_invalid(field: str, description: str, message: str) -> InvalidArgument:
    """INVALID_ARGUMENT FIELD_INVALID naming one field: ``description`` is its field violation
    (what a valid value is), ``message`` the sentence the caller reads."""
    return InvalidArgument(
        "FIELD_INVALID",
        message,
        metadata={"field": field},
        field_violations=[FieldViolation(field, description)],
    )


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
        DeadlineExceeded,
        Cancelled,
        Internal,
    )
}

# A status without ErrorInfo comes from the transport or a framework, not from a domain refusal:
# its details may name peers ("ipv4:10.0.0.7:50051"), so the caller gets a fixed message instead.
# It keeps its code (a code without a typed error becomes INTERNAL) and takes a fixed reason.
_BARE_REASONS: dict[ErrorKind, str] = {
    ErrorKind.DEADLINE_EXCEEDED: "DOWNSTREAM_DEADLINE_EXCEEDED",
    ErrorKind.CANCELLED: "DOWNSTREAM_CANCELLED",
}
_BARE_MESSAGES: dict[ErrorKind, str] = {
    ErrorKind.DEADLINE_EXCEEDED: "the call did not finish before its deadline",
    ErrorKind.CANCELLED: "the call was cancelled",
    ErrorKind.UNAVAILABLE: "the called service is unavailable; retry later",
}


def bare_status_error(code: grpc.StatusCode | None) -> DomainError:
    """The typed error for a status that carries no ErrorInfo, with a fixed, safe message."""
    kind = next((k for k in ErrorKind if k.value == code), ErrorKind.INTERNAL)
    reason = _BARE_REASONS.get(kind, kind.name)
    message = _BARE_MESSAGES.get(kind, f"the call failed ({kind.name}); see the service log")
    return _BY_KIND[kind](reason, message)


def _pack(message: object) -> any_pb2.Any:
    if isinstance(message, any_pb2.Any):
        return message  # relayed from a downstream status as it came
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
    details += [_pack(carried) for carried in error.details]
    status = status_pb2.Status(
        code=getattr(code_pb2, error.kind.name), message=error.message, details=details
    )
    return rpc_status.to_status(status)


def from_rpc_error(error: grpc.RpcError) -> DomainError:
    """Rebuild the typed domain error from a rich status (for clients and service-to-service
    calls). A status without a well-formed ErrorInfo becomes :func:`bare_status_error`; its
    original details are logged here, never passed on."""
    code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
    status = rpc_status.from_call(error) if isinstance(error, grpc.Call) else None
    info: error_details_pb2.ErrorInfo | None = None
    fields: list[FieldViolation] = []
    preconditions: list[PreconditionViolation] = []
    carried: list[any_pb2.Any] = []
    details: Sequence[any_pb2.Any] = status.details if status is not None else ()
    for detail in details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            fields = [FieldViolation(v.field, v.description) for v in bad.field_violations]
        elif detail.Is(error_details_pb2.PreconditionFailure.DESCRIPTOR):
            failure = error_details_pb2.PreconditionFailure()
            detail.Unpack(failure)
            preconditions = [
                PreconditionViolation(v.type, v.subject, v.description) for v in failure.violations
            ]
        elif detail.type_url.startswith(_CONTRACT_TYPE_PREFIX):
            carried.append(detail)
    if status is None or info is None or not _REASON_PATTERN.match(info.reason):
        original = error.details() if isinstance(error, grpc.Call) else str(error)
        name = code.name if code is not None else "UNKNOWN"
        log.warning("call failed with %s and no ErrorInfo: %s", name, original)
        return bare_status_error(code)
    kind = next((k for k in ErrorKind if k.value == code), ErrorKind.INTERNAL)
    return _BY_KIND[kind](
        reason=info.reason,
        message=status.message,
        metadata=dict(info.metadata),
        field_violations=fields,
        precondition_violations=preconditions,
        details=carried,
    )
