"""The gate in front of every hosted method: what is decided from a call's metadata alone, before
gRPC reads or parses its request message (ADR 0040).

A synchronous gRPC server hands each call to a pool thread that first waits, without a timeout
of its own, for the request message, and only then runs the handler; the call policy
(shared.runtime.call_policy.CallPolicy) authenticates inside the handler. So a stranger who opens
calls and never sends a body held a pool thread each, and anyone could make a service receive and
parse a message of the server-wide size limit. The gate, a server interceptor, runs on the serving
thread when the call's headers arrive:

* a call without a recognised credential for the method, or not allowed to call it, is refused
  there (UNAUTHENTICATED / PERMISSION_DENIED with the usual reasons);
* a call beyond the service's bound on calls in the pool (running plus queued) is refused with
  RESOURCE_EXHAUSTED ``SERVER_BUSY``, a RetryInfo detail and ``grpc-retry-pushback-ms``;
* every other call goes on to its handler, whose request deserializer refuses a message over the
  method's limit (``MESSAGE_TOO_LARGE``) without parsing it.

A refusal is answered by a request-streaming handler on a pool of its own: gRPC starts it without
waiting for a request message, it reads none, and its thread is back at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent import futures
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import descriptor as _descriptor

from shared.runtime.auth import Directory, Role, authorize
from shared.runtime.errors import DomainError, ResourceExhausted, exhausted_for_now, to_status
from shared.runtime.log_context import FIELDS_ATTRIBUTE
from shared.runtime.metrics import count_gate_refusal

if TYPE_CHECKING:
    Handler = grpc.RpcMethodHandler[Any, Any]
    Interceptor = grpc.ServerInterceptor[Any, Any]
else:
    Handler = grpc.RpcMethodHandler
    Interceptor = grpc.ServerInterceptor

audit = logging.getLogger("forge.audit")

#: Trailing metadata gRPC clients read as the server's requested delay before a retry.
PUSHBACK_KEY = "grpc-retry-pushback-ms"
#: Threads that answer the gate's refusals: each answer sends a status and reads nothing.
REFUSAL_THREADS = 2


class CountingPool(futures.ThreadPoolExecutor):
    """The server's pool, counting the calls it holds (running or queued) so the gate can bound
    them; gRPC submits exactly one task per call it hands to the pool."""

    def __init__(self, max_workers: int, thread_name_prefix: str) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        self.threads = max_workers
        self._held = 0
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        return self._held

    def _release(self, _future: futures.Future[Any]) -> None:
        with self._lock:
            self._held -= 1

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> futures.Future[Any]:
        with self._lock:
            self._held += 1
        try:
            future = super().submit(fn, *args, **kwargs)
        except BaseException:
            self._release(None)  # type: ignore[arg-type]
            raise
        future.add_done_callback(self._release)
        return future


@dataclass(frozen=True)
class _Status(grpc.Status):  # type: ignore[misc]  # grpc.Status is an abstract class, untyped
    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple[tuple[str, str | bytes], ...]


def with_trailing(status: grpc.Status, extra: tuple[tuple[str, str], ...]) -> grpc.Status:
    """``status`` with ``extra`` trailing metadata."""
    return _Status(status.code, status.details, (*status.trailing_metadata, *extra))


#: On any other RESOURCE_EXHAUSTED (a cap, a message too large): a client's retry policy must not
#: repeat the call, which gRPC's retry design (gRFC A6) reads from a negative pushback.
NO_RETRY = ((PUSHBACK_KEY, "-1"),)


class Gate(Interceptor):
    """Authenticates and authorizes from the metadata and bounds the calls a pool holds, for the
    hosted methods (``method_roles``); health and reflection pass as they are."""

    def __init__(
        self,
        directory: Directory,
        method_roles: Mapping[str, frozenset[Role]],
        pool: CountingPool,
        *,
        max_calls: int,
        retry_after_ms: int,
        certificate_clients: bool,
    ) -> None:
        self._directory = directory
        self._method_roles = dict(method_roles)
        self._pool = pool
        self._max_calls = max_calls
        self._retry_after_ms = retry_after_ms
        # With client certificates required, a call without a token was authenticated by the
        # TLS handshake; its subject is not in the metadata, so the handler decides it.
        self._certificate_clients = certificate_clients
        self._refusals = futures.ThreadPoolExecutor(REFUSAL_THREADS, thread_name_prefix="refusal")

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Handler | None],
        details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        method: str = details.method  # type: ignore[attr-defined]
        allowed = self._method_roles.get(method)
        if allowed is None:
            return continuation(details)  # health, reflection, or no such method
        authorization = None
        for key, value in details.invocation_metadata:  # type: ignore[attr-defined]
            if key == "authorization":
                authorization = value  # the last, as the call policy reads it
        if authorization is not None or not self._certificate_clients:
            try:
                principal = self._directory.authenticate(
                    authorization if isinstance(authorization, str) else None
                )
                authorize(principal, allowed, method)
            except DomainError as error:
                audit.warning(
                    "denied at the gate method=%s reason=%s identity=%s",
                    method,
                    error.reason,
                    error.metadata.get("identity", "-"),
                    extra={FIELDS_ATTRIBUTE: {"grpc_method": method, "reason": error.reason}},
                )
                return self._refusal(method, error, ())
        if self._pool.held >= self._max_calls:
            return self._refusal(method, self._busy(), ((PUSHBACK_KEY, str(self._retry_after_ms)),))
        return continuation(details)

    def _busy(self) -> DomainError:
        return exhausted_for_now(
            "SERVER_BUSY",
            f"the service holds {self._max_calls} calls; retry after {self._retry_after_ms} ms",
            limit=self._max_calls,
            retry_after_ms=self._retry_after_ms,
        )

    def _refusal(
        self, method: str, error: DomainError, extra: tuple[tuple[str, str], ...]
    ) -> Handler:
        status = with_trailing(to_status(error), extra)
        count_gate_refusal(method, status.code.name, error.reason)

        def refuse(_requests: Iterator[Any], context: grpc.ServicerContext) -> None:
            context.abort_with_status(status)

        # gRPC runs a behaviour with this attribute on that pool instead of the server's.
        refuse.experimental_thread_pool = self._refusals  # type: ignore[attr-defined]
        return grpc.stream_unary_rpc_method_handler(refuse)

    def close(self) -> None:
        self._refusals.shutdown(wait=False)


# --- per-method message limits ----------------------------------------------------------------


@dataclass(frozen=True)
class Oversized:
    """What a limited deserializer returns instead of parsing a message over its limit."""

    size: int
    limit: int


def carries_bytes(message: _descriptor.Descriptor, seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``message`` has a ``bytes`` field at any depth: an uploaded blob, checkpoint or
    response, the only requests that may be large."""
    if message.full_name in seen:
        return False
    for field in message.fields:
        if field.type == _descriptor.FieldDescriptor.TYPE_BYTES:
            return True
        if field.message_type is not None and carries_bytes(
            field.message_type, seen | {message.full_name}
        ):
            return True
    return False


def limited(
    deserializer: Callable[[bytes], Any] | None, limit: int
) -> Callable[[bytes], Any] | None:
    """``deserializer`` that parses nothing over ``limit`` bytes: it returns :class:`Oversized`,
    which the call policy refuses (raising here would end the call INTERNAL)."""
    if deserializer is None:
        return None
    parse = deserializer

    def deserialize(data: bytes) -> Any:
        if len(data) > limit:
            return Oversized(len(data), limit)
        return parse(data)

    return deserialize


def too_large(request: Oversized, method: str) -> DomainError:
    return ResourceExhausted(
        "MESSAGE_TOO_LARGE",
        f"{method} accepts requests of at most {request.limit} bytes, not {request.size}",
        metadata={"limit_bytes": str(request.limit), "size_bytes": str(request.size)},
    )
