"""Outbound channels for service-to-service and client calls: bearer token, trace context, and a
timeout that never outlives the inbound call's deadline."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import grpc.experimental
from opentelemetry.instrumentation.grpc import client_interceptor, grpcext

from shared.runtime.config import ClientTls, Settings, TransportSettings
from shared.runtime.deadline import downstream_timeout
from shared.runtime.limits import DEFAULT_DOWNSTREAM_TIMEOUT_SECONDS, DEFAULT_MAX_MESSAGE_BYTES
from shared.runtime.telemetry import exporting
from shared.runtime.transport import RetriedRead, channel_options, resolvable


class _AuthorizedMethod:
    """One method of an :class:`AuthorizedChannel`: each call gets the bearer token (unless the
    caller sent an ``authorization`` of its own) and a timeout capped at the inbound deadline."""

    __slots__ = ("_authorization", "_default_timeout", "_method")

    def __init__(
        self, method: Any, authorization: tuple[str, str] | None, default_timeout: float
    ) -> None:
        self._method = method
        self._authorization = authorization
        self._default_timeout = default_timeout

    def _metadata(self, metadata: Sequence[tuple[str, str | bytes]] | None) -> Any:
        if self._authorization is None:
            return metadata
        if not metadata:
            return (self._authorization,)
        if any(key == "authorization" for key, _ in metadata):
            return metadata
        return (*metadata, self._authorization)

    def _sent(self, timeout: float | None, metadata: Any, options: dict[str, Any]) -> Any:
        """The call's own options with the capped timeout and the token added."""
        options["timeout"] = downstream_timeout(timeout or self._default_timeout)
        options["metadata"] = self._metadata(metadata)
        return options

    def __call__(
        self, request: Any, timeout: float | None = None, metadata: Any = None, **options: Any
    ) -> Any:
        return self._method(request, **self._sent(timeout, metadata, options))

    def with_call(
        self, request: Any, timeout: float | None = None, metadata: Any = None, **options: Any
    ) -> Any:
        return self._method.with_call(request, **self._sent(timeout, metadata, options))

    def future(
        self, request: Any, timeout: float | None = None, metadata: Any = None, **options: Any
    ) -> Any:
        return self._method.future(request, **self._sent(timeout, metadata, options))


class AuthorizedChannel(grpc.Channel):
    """A channel whose unary and server-streaming calls carry ``authorization`` metadata and a
    timeout that never outlives the inbound call's deadline. Added to each call's own arguments
    rather than by ``grpc.intercept_channel``, whose interceptor machinery cost 45–70 µs of CPU
    per call (docs/performance-history.md, round 4, ninth pass); client-streaming calls, which no
    contract has, pass through unchanged."""

    def __init__(self, channel: grpc.Channel, token: str, default_timeout: float) -> None:
        self._channel = channel
        self._authorization = ("authorization", f"Bearer {token}") if token else None
        self._default_timeout = default_timeout

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _AuthorizedMethod(
            self._channel.unary_unary(method, *args, **kwargs),
            self._authorization,
            self._default_timeout,
        )

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _AuthorizedMethod(
            self._channel.unary_stream(method, *args, **kwargs),
            self._authorization,
            self._default_timeout,
        )

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._channel.stream_unary(method, *args, **kwargs)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._channel.stream_stream(method, *args, **kwargs)

    def subscribe(self, callback: Callable[..., Any], try_to_connect: bool = False) -> None:
        self._channel.subscribe(callback, try_to_connect)

    def unsubscribe(self, callback: Callable[..., Any]) -> None:
        self._channel.unsubscribe(callback)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> AuthorizedChannel:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._channel.close()


# A server stream's responses are read on the thread that iterates them instead of being handed
# over from the channel's spin thread one by one: a 5-message ReadRunSnapshot costs its reader
# 29 % less CPU (docs/performance-history.md, round 4, sixth pass). Only on the channels one service
# keeps open to another for its whole life (service_channel): such a stream does not keep its
# channel alive, so a stream read from a stub of a channel nobody holds any more would end early or
# never start, which a caller of open_channel may well do. cancel() from another thread and
# deadlines still end the stream (tests/shared/runtime/test_transport.py); result()/exception() of
# such a call do not block, which nothing here calls on a stream.
READ_STREAMS_ON_THE_READING_THREAD = (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)


def open_channel(
    target: str,
    token: str = "",
    *,
    root_certificates: bytes | None = None,
    client_certificate: tuple[bytes, bytes] | None = None,
    default_timeout: float = DEFAULT_DOWNSTREAM_TIMEOUT_SECONDS,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    extra_interceptors: Sequence[grpc.UnaryUnaryClientInterceptor] = (),  # type: ignore[type-arg]
    transport: TransportSettings | None = None,
    streams_on_reading_thread: bool = False,
    tls: ClientTls | None = None,
    retried_reads: Sequence[RetriedRead] = (),
) -> grpc.Channel:
    """A traced, authenticated channel. TLS when root certificates are given; mTLS when a
    (private key, certificate chain) pair is given too. ``tls`` gives the same as files
    (FORGE_TLS_CA / FORGE_TLS_CERT / FORGE_TLS_KEY). A ``host:port`` target is resolved as
    ``dns:///host:port`` and calls are spread over every address (shared.runtime.transport).
    ``streams_on_reading_thread``: for a channel kept open as long as its streams are read
    (READ_STREAMS_ON_THE_READING_THREAD). ``retried_reads``: the RPCs retried when they fail
    UNAVAILABLE (shared.contract.channels passes the contract's idempotent reads)."""
    if tls is not None:
        root_certificates, client_certificate = tls_material(tls)
    options = [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        *channel_options(transport or TransportSettings(), retried_reads),
        *([READ_STREAMS_ON_THE_READING_THREAD] if streams_on_reading_thread else []),
    ]
    target = resolvable(target)
    if root_certificates is not None:
        key, chain = client_certificate if client_certificate else (None, None)
        # An empty bundle means "the system's trusted roots".
        credentials = grpc.ssl_channel_credentials(root_certificates or None, key, chain)
        channel = grpc.secure_channel(target, credentials, options=options)
    else:
        channel = grpc.insecure_channel(target, options=options)
    if exporting():
        # Client spans and trace context only where something exports them
        # (shared.runtime.telemetry).
        channel = grpcext.intercept_channel(channel, client_interceptor())  # type: ignore[no-untyped-call]
    if extra_interceptors:
        # Inside the token and timeout, so they see the calls as sent.
        channel = grpc.intercept_channel(channel, *extra_interceptors)
    return AuthorizedChannel(channel, token, default_timeout)


def tls_material(tls: ClientTls) -> tuple[bytes, tuple[bytes, bytes] | None]:
    """The PEM bytes ``tls`` names: the root bundle (empty: the system's roots) and the
    (private key, certificate chain) pair, if any. Read once, when a channel opens."""
    roots = Path(tls.ca_file).read_bytes() if tls.ca_file else b""
    if not tls.cert_file:
        return roots, None
    return roots, (Path(tls.key_file).read_bytes(), Path(tls.cert_file).read_bytes())


def call(method: Callable[..., Any], request: Any, **kwargs: Any) -> Any:
    """Invoke a stub method; a failed call re-raises as the typed domain error it carried, so a
    downstream refusal keeps its reason when it travels back to the original caller. A status
    without ErrorInfo (deadline, cancellation, unreachable peer) keeps its code with a fixed reason
    and message; its original details, which may name peer addresses, are only logged here."""
    from shared.runtime.errors import from_rpc_error

    try:
        return method(request, **kwargs)
    except grpc.RpcError as error:
        raise from_rpc_error(error) from None


def stream(method: Callable[..., Any], request: Any, **kwargs: Any) -> Iterator[Any]:
    """:func:`call` for a server-streaming method: each response as it arrives; a failed stream
    re-raises as the typed domain error it carried."""
    from shared.runtime.errors import from_rpc_error

    try:
        yield from method(request, **kwargs)
    except grpc.RpcError as error:
        raise from_rpc_error(error) from None


def service_channel(
    settings: Settings, service: str, retried_reads: Sequence[RetriedRead] = ()
) -> grpc.Channel:
    """The channel one service uses to call another, under its own identity: its bearer token,
    and, when it serves TLS itself, TLS to the callee with its own certificate as the client
    certificate. The callee's certificate is verified against FORGE_TLS_CA, else the CA bundle in
    FORGE_TLS_CLIENT_CA (which then verifies peers both ways), else the system's roots."""
    target = settings.targets[service]
    if settings.tls is None:
        return open_channel(
            target,
            settings.service_token,
            transport=settings.transport,
            streams_on_reading_thread=True,
            retried_reads=retried_reads,
        )
    return open_channel(
        target,
        settings.service_token,
        tls=ClientTls(
            settings.tls.ca_file or settings.tls.client_ca_file,
            settings.tls.cert_file,
            settings.tls.key_file,
        ),
        transport=settings.transport,
        streams_on_reading_thread=True,
        retried_reads=retried_reads,
    )
