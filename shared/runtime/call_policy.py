"""The per-call policy every hosted method runs behind: authentication (bearer token or client
certificate subject), authorization by the contract's roles, the request-size limit, the inbound
deadline, and the mapping of a domain error to a rich status (with the audit log of a denial)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import grpc

from shared.runtime.auth import (
    Directory,
    Principal,
    Role,
    authorize,
    reset_current_principal,
    set_current_principal,
)
from shared.runtime.deadline import (
    reset_inbound_activity,
    reset_inbound_deadline,
    set_inbound_activity,
    set_inbound_deadline,
)
from shared.runtime.errors import DomainError, ErrorKind, Internal, to_status
from shared.runtime.gate import NO_RETRY, Oversized, limited, too_large, with_trailing
from shared.runtime.log_context import FIELDS_ATTRIBUTE

log = logging.getLogger("forge.server")
audit = logging.getLogger("forge.audit")

if TYPE_CHECKING:
    Handler = grpc.RpcMethodHandler[Any, Any]
else:
    Handler = grpc.RpcMethodHandler


def _authorization(context: grpc.ServicerContext) -> str | None:
    """The call's ``authorization`` metadata (the last, were it sent twice), if text."""
    found = None
    for key, value in context.invocation_metadata():
        if key == "authorization":
            found = value
    return found if isinstance(found, str) else None


def _peer_subjects(context: grpc.ServicerContext) -> list[str]:
    values: Sequence[bytes] = context.auth_context().get("x509_common_name", [])  # type: ignore[assignment]
    return [value.decode("utf-8", "replace") for value in values]


class CallPolicy:
    """Authenticates, authorizes, captures the deadline and maps domain errors, around every
    handler of the hosted services. Wraps each method's handler once, when the server registers
    it: the per-call work a server interceptor does on the one serving thread is kept to the
    gate's metadata check (shared.runtime.gate, ADR 0040; docs/performance-history.md, round 4,
    thirteenth pass). It authenticates again here because a client certificate's subject is
    visible only to the handler."""

    def __init__(
        self,
        directory: Directory,
        method_roles: Mapping[str, frozenset[Role]],
        request_limits: Mapping[str, int] | None = None,
    ) -> None:
        self._directory = directory
        self._method_roles = dict(method_roles)
        # Method → the largest request it parses; unlisted methods: unlimited here.
        self._request_limits = dict(request_limits or {})

    def wrap(self, method: str, handler: Handler) -> Handler:
        """``handler`` of ``method`` (``/pkg.Service/Method``) behind the policy. A method
        without roles is callable by no one (fail closed)."""
        allowed = self._method_roles.get(method, frozenset())
        limit = self._request_limits.get(method)
        deserializer = (
            handler.request_deserializer
            if limit is None
            else limited(handler.request_deserializer, limit)
        )
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                self._wrap_unary(handler.unary_unary, method, allowed),
                request_deserializer=deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                self._wrap_stream(handler.unary_stream, method, allowed),
                request_deserializer=deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler  # client-streaming methods are not part of the contracts

    def _enter(
        self, context: grpc.ServicerContext, method: str, allowed: frozenset[Role]
    ) -> Principal:
        authorization = _authorization(context)
        # The client certificate's subjects count only without a bearer token: not read then.
        subjects = () if authorization else _peer_subjects(context)
        principal = self._directory.authenticate(authorization, subjects)
        authorize(principal, allowed, method)
        return principal

    @staticmethod
    def _admit(request: Any, method: str) -> None:
        if isinstance(request, Oversized):
            raise too_large(request, method)

    def _refuse(self, context: grpc.ServicerContext, method: str, error: DomainError) -> NoReturn:
        if error.kind.name in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
            audit.warning(
                "denied method=%s peer=%s reason=%s identity=%s",
                method,
                context.peer(),
                error.reason,
                error.metadata.get("identity", "-"),
                extra={FIELDS_ATTRIBUTE: {"grpc_method": method, "reason": error.reason}},
            )
        else:
            # "Absent" answers a read (an export probing for blobs, the console asking for a
            # recovery read-back): nothing happened, so it stays out of the INFO log.
            log.log(
                logging.DEBUG if error.kind is ErrorKind.NOT_FOUND else logging.INFO,
                "refused method=%s reason=%s: %s",
                method,
                error.reason,
                error.message,
                extra={FIELDS_ATTRIBUTE: {"grpc_method": method, "reason": error.reason}},
            )
        status = to_status(error)
        if error.kind.name == "RESOURCE_EXHAUSTED":
            status = with_trailing(status, NO_RETRY)  # only the gate's SERVER_BUSY is transient
        context.abort_with_status(status)
        raise AssertionError("abort_with_status returns only by raising")  # pragma: no cover

    def _fail(self, context: grpc.ServicerContext, method: str) -> NoReturn:
        log.exception("internal error in %s", method)
        context.abort_with_status(
            to_status(Internal("INTERNAL_ERROR", "internal error; see the service log"))
        )
        raise AssertionError("abort_with_status returns only by raising")  # pragma: no cover

    def _wrap_unary(
        self,
        behaviour: Callable[[Any, grpc.ServicerContext], Any],
        method: str,
        allowed: frozenset[Role],
    ) -> Callable[[Any, grpc.ServicerContext], Any]:
        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            with _CallScope(self, context, method):
                set_current_principal(self._enter(context, method, allowed))
                self._admit(request, method)
                return behaviour(request, context)

        return handle

    def _wrap_stream(
        self,
        behaviour: Callable[[Any, grpc.ServicerContext], Iterator[Any]],
        method: str,
        allowed: frozenset[Role],
    ) -> Callable[[Any, grpc.ServicerContext], Iterator[Any]]:
        def handle(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            with _CallScope(self, context, method):
                set_current_principal(self._enter(context, method, allowed))
                self._admit(request, method)
                yield from behaviour(request, context)

        return handle


class _CallScope:
    """Around one handler (which authenticates first, inside it): expose the principal and the
    deadline to the handler's code, and turn any failure into a rich status. A class, not a
    generator-based context manager, which cost every served call a few microseconds more."""

    __slots__ = ("_active", "_context", "_deadline", "_method", "_policy", "_principal")

    def __init__(self, policy: CallPolicy, context: grpc.ServicerContext, method: str) -> None:
        self._policy, self._context, self._method = policy, context, method

    def __enter__(self) -> None:
        self._deadline = set_inbound_deadline(self._context.time_remaining())
        self._active = set_inbound_activity(self._context.is_active)
        self._principal = set_current_principal(None)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _trace: object
    ) -> None:
        try:
            if isinstance(error, DomainError):
                self._policy._refuse(self._context, self._method, error)
            elif isinstance(error, Exception):
                self._policy._fail(self._context, self._method)
        finally:
            reset_current_principal(self._principal)
            reset_inbound_activity(self._active)
            reset_inbound_deadline(self._deadline)
