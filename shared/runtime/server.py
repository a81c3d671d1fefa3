"""One server bootstrap for all four services: the gate (authentication from the metadata, a
bound on held calls, per-method message limits; shared.runtime.gate), authorization, rich error
mapping, tracing, deadline capture, health, reflection, graceful shutdown. The per-call policy
(authentication, authorization, limits, refusals) is shared.runtime.call_policy."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.descriptor import Descriptor, MethodDescriptor, ServiceDescriptor
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.instrumentation.grpc import server_interceptor

from shared.runtime.auth import (
    Directory,
    Role,
)
from shared.runtime.call_policy import CallPolicy, Handler
from shared.runtime.config import Settings
from shared.runtime.gate import (
    CountingPool,
    Gate,
    carries_bytes,
)
from shared.runtime.limits import DEFAULT_SERVER_THREADS
from shared.runtime.metrics import counted
from shared.runtime.readiness import LIVENESS
from shared.runtime.stop_signal import wait_for_stop_signal
from shared.runtime.telemetry import configure_tracing, exporting
from shared.runtime.transport import server_options

log = logging.getLogger("forge.server")
audit = logging.getLogger("forge.audit")

#: What the server puts around each method's handler when it registers it: (full method name
#: ``/pkg.Service/Method``, handler) → handler.
Around = Callable[[str, Handler], Handler]


def _as_is(_method: str, handler: Handler) -> Handler:
    return handler


@dataclass(frozen=True)
class ServiceBinding:
    """A servicer to host: the handler of each of its methods, with the roles allowed to call
    each."""

    descriptor: ServiceDescriptor
    #: Each method's handler, by method name.
    handlers: Mapping[str, Handler]
    method_roles: Mapping[str, frozenset[Role]]
    #: The request type of each registered RPC the descriptor does not declare.
    extra_inputs: Mapping[str, Descriptor] = field(default_factory=dict)

    def full_method_roles(self) -> dict[str, frozenset[Role]]:
        missing = [m.name for m in self.descriptor.methods if m.name not in self.method_roles]
        if missing:
            # Fail closed: a method nobody decided on must not become callable by accident.
            raise ValueError(f"{self.descriptor.full_name}: no roles declared for {missing}")
        return {
            f"/{self.descriptor.full_name}/{name}": roles
            for name, roles in self.method_roles.items()
        }

    def register(self, server: grpc.Server, around: Around = _as_is) -> None:
        """Add every handler to ``server``, each wrapped by ``around`` once, here."""
        service = self.descriptor.full_name
        handlers = {
            name: around(f"/{service}/{name}", handler) for name, handler in self.handlers.items()
        }
        # As generated add_*_to_server does: generic lookup and the registered-method fast path.
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
        server.add_registered_method_handlers(service, handlers)  # type: ignore[attr-defined]  # grpcio >= 1.63; the stubs lag


#: What answers one RPC: a servicer's method, or a route's answer (request, context → response,
#: or an iterator of responses for a server-streaming RPC).
Behaviour = Callable[[Any, grpc.ServicerContext], Any]


def service_binding(
    descriptor: ServiceDescriptor,
    method_roles: Mapping[str, frozenset[Role]],
    behaviour_of: Callable[[str], Behaviour],
    registered: Mapping[str, tuple[Any, Any]] | None = None,
) -> ServiceBinding:
    """The one way every service is hosted: its table RPC name → roles, and the behaviour that
    answers each RPC (``behaviour_of(name)``), registered from the descriptor. ``registered``
    names unary RPCs a registered recovery workflow adds with their request and response classes
    (the contract's own for a declared RPC; others only for a workflow the contract does not
    declare yet, such as a test-only one). Fails closed: an RPC without roles, or roles for a name
    that is neither an RPC nor registered, refuses to start."""
    extra = dict(registered or {})
    declared = {method.name for method in descriptor.methods}
    missing = sorted(declared - set(method_roles))
    unknown = sorted(set(method_roles) - declared - set(extra))
    if missing or unknown:
        raise ValueError(f"{descriptor.full_name}: no roles for {missing}, no RPC for {unknown}")
    handlers = {
        m.name: _method_handler(m, behaviour_of(m.name))
        for m in descriptor.methods
        if m.name not in extra
    }
    for name, (request_class, response_class) in extra.items():
        handlers[name] = grpc.unary_unary_rpc_method_handler(
            behaviour_of(name),
            request_deserializer=request_class.FromString,
            response_serializer=response_class.SerializeToString,
        )
    inputs = {name: request_class.DESCRIPTOR for name, (request_class, _) in extra.items()}
    return ServiceBinding(descriptor, handlers, method_roles, inputs)


def _method_handler(method: MethodDescriptor, behaviour: Behaviour) -> Handler:
    if method.client_streaming:
        raise ValueError(f"{method.full_name}: client-streaming RPCs are not part of the contracts")
    handler = (
        grpc.unary_stream_rpc_method_handler
        if method.server_streaming
        else grpc.unary_unary_rpc_method_handler
    )
    return handler(
        behaviour,
        request_deserializer=GetMessageClass(method.input_type).FromString,
        response_serializer=GetMessageClass(method.output_type).SerializeToString,
    )


def _server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    if settings.tls is None:
        return None
    with open(settings.tls.key_file, "rb") as key, open(settings.tls.cert_file, "rb") as cert:
        pair = (key.read(), cert.read())
    if settings.tls.client_ca_file:
        with open(settings.tls.client_ca_file, "rb") as ca:
            return grpc.ssl_server_credentials(
                [pair], root_certificates=ca.read(), require_client_auth=True
            )
    return grpc.ssl_server_credentials([pair])


class RunningServer:
    """A started server; ``stop`` drains in-flight calls within the grace period."""

    def __init__(
        self,
        server: grpc.Server,
        health_servicer: health.HealthServicer,
        port: int,
        names: Sequence[str] = (),
        health_server: grpc.Server | None = None,
        health_port: int = 0,
    ):
        self.server = server
        self.health = health_servicer
        self.port = port
        #: The hosted services' full names (each has its own health status).
        self.names = list(names)
        #: The plaintext health-only server (FORGE_HEALTH_PORT), when there is one.
        self.health_server = health_server
        self.health_port = health_port
        #: The gate in front of the hosted methods (closed with the server).
        self.gate: Gate | None = None
        self._stopped = threading.Event()

    def stop(self, grace: float) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        # NOT_SERVING first, on both ports, so probes and balancers stop sending new calls.
        self.health.enter_graceful_shutdown()
        self.server.stop(grace).wait()
        if self.health_server is not None:
            self.health_server.stop(0).wait()
        if self.gate is not None:
            self.gate.close()

    def wait(self) -> None:
        self.server.wait_for_termination()


def start_server(
    settings: Settings,
    bindings: Sequence[ServiceBinding],
    directory: Directory,
    *,
    max_workers: int = DEFAULT_SERVER_THREADS,
    serving: bool = True,
) -> RunningServer:
    """Build, bind and start a server hosting ``bindings`` (port 0 picks a free port). With
    ``serving=False`` health answers NOT_SERVING until someone sets it (shared.runtime.readiness,
    once the service's dependencies answer)."""
    provider = configure_tracing(settings.service)
    method_roles: dict[str, frozenset[Role]] = {}
    for binding in bindings:
        method_roles.update(binding.full_method_roles())
    options = [
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.so_reuseport", 0),
        *server_options(settings.transport),
    ]
    pool = CountingPool(max_workers, settings.service)
    max_calls = max_workers + settings.max_queued_calls
    gate = Gate(
        directory,
        method_roles,
        pool,
        max_calls=max_calls,
        retry_after_ms=settings.retry_after_ms,
        certificate_clients=bool(settings.tls and settings.tls.client_ca_file),
    )
    # The gate first: a refused call costs no span. Spans only where something exports them
    # (shared.runtime.telemetry).
    interceptors: list[Any] = [gate]
    if exporting():
        interceptors.append(server_interceptor(tracer_provider=provider))  # type: ignore[no-untyped-call]
    server = grpc.server(
        pool,
        interceptors=interceptors,
        options=options,
        # gRPC's own bound, behind the gate's: also counts health, reflection and the gate's
        # refusals, each of which ends at once; its refusal carries no retry delay.
        maximum_concurrent_rpcs=2 * max_calls,
    )
    policy = CallPolicy(directory, method_roles, request_limits(settings, bindings))

    def around(method: str, handler: Handler) -> Handler:
        # The metrics outside the call policy, so refused calls are counted and timed too.
        return counted(method, policy.wrap(method, handler))

    for binding in bindings:
        binding.register(server, around)
    # Health and reflection are registered outside the bindings, without the call policy: they
    # answer without credentials, so probes and grpcurl `list` work.
    health_servicer = health.HealthServicer(experimental_non_blocking=True)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [binding.descriptor.full_name for binding in bindings]
    initial = (
        health_pb2.HealthCheckResponse.SERVING
        if serving
        else (health_pb2.HealthCheckResponse.NOT_SERVING)
    )
    for name in ["", *names]:
        health_servicer.set(name, initial)
    health_servicer.set(LIVENESS, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection(
        [*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server
    )
    credentials = _server_credentials(settings)
    if credentials is None:
        port = server.add_insecure_port(settings.address)
    else:
        port = server.add_secure_port(settings.address, credentials)
    if port == 0:
        raise OSError(f"could not bind {settings.address}")
    server.start()
    log.info("%s serving %s on %s:%d", settings.service, ", ".join(names), settings.host, port)
    health_server, health_port = _health_only(settings, health_servicer)
    running = RunningServer(server, health_servicer, port, names, health_server, health_port)
    running.gate = gate
    return running


def request_limits(settings: Settings, bindings: Sequence[ServiceBinding]) -> dict[str, int]:
    """Each hosted method's request limit: the server-wide one where the request carries bytes
    (a blob, a checkpoint, a raw response), the small one everywhere else."""
    small = min(settings.max_request_bytes, settings.max_message_bytes)
    limits: dict[str, int] = {}
    for binding in bindings:
        inputs = {m.name: m.input_type for m in binding.descriptor.methods}
        inputs = {**binding.extra_inputs, **inputs}
        for name in binding.handlers:
            request = inputs.get(name)
            large = request is not None and carries_bytes(request)
            limits[f"/{binding.descriptor.full_name}/{name}"] = (
                settings.max_message_bytes if large else small
            )
    return limits


def _health_only(
    settings: Settings, servicer: health.HealthServicer
) -> tuple[grpc.Server | None, int]:
    """With FORGE_HEALTH_PORT set, the same health statuses on a plaintext port that serves
    nothing else: Kubernetes' gRPC probes cannot speak TLS. The statuses say nothing secret."""
    if not settings.health_port:
        return None, 0
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"{settings.service}-health"),
        # As the service port: a second process on the same port is an error, not a share.
        options=[("grpc.so_reuseport", 0)],
    )
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    address = f"{settings.host}:{settings.health_port}"
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"could not bind the health port {address}")
    server.start()
    log.info("%s health on %s (plaintext, health only)", settings.service, address)
    return server, port


def serve_until_signalled(running: RunningServer, grace: float) -> None:
    """Block until SIGTERM / SIGINT (shared.runtime.stop_signal), then drain and stop."""
    signum = wait_for_stop_signal()
    log.info("signal %d: draining for up to %.0fs", signum, grace)
    running.stop(grace)
