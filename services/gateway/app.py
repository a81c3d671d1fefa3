"""The ASGI application: every annotated route, transcoded to a gRPC call on the hosting server.

Starlette carries the HTTP side (requests, streaming responses, lifespan); the route table comes
from the descriptors (services.gateway.routes). The caller's ``Authorization`` header travels as
``authorization`` metadata: the gateway holds no identity of its own, so every decision stays with
the services. A request the gateway cannot transcode is refused before any call is made.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import grpc
from google.protobuf import message
from google.rpc import code_pb2, status_pb2
from grpc_health.v1 import health_pb2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route as StarletteRoute

from services.gateway.config import GatewaySettings
from services.gateway.console import console_routes
from services.gateway.index import index_routes
from services.gateway.observed import ROUTE_KEY, ObservedApp
from services.gateway.openapi import openapi_document
from services.gateway.routes import Match, Route, RouteTable, contract_routes
from services.gateway.status import (
    METHOD_NOT_ALLOWED,
    REQUEST_BODY_TOO_LARGE,
    ROUTE_NOT_FOUND,
    GatewayRefusal,
    http_status,
    status_bytes,
    status_json,
    status_of_rpc_error,
)
from services.gateway.transcode import decode_body, message_bytes, request_message
from shared.contract.channels import RETRIED_READS
from shared.runtime.client import tls_material
from shared.runtime.telemetry import configure_tracing, trace_metadata
from shared.runtime.transport import channel_options, resolvable

log = logging.getLogger("forge.gateway")
JSON = "application/json"
NDJSON = "application/x-ndjson"
# How long a stream may take to produce its first message before the 200 headers go out anyway
# (a following stream may legitimately wait for the next append).
FIRST_MESSAGE_WAIT_SECONDS = 2.0
_ALL_METHODS = ["GET", "PUT", "POST", "DELETE", "PATCH"]
# How long /healthz waits for each server's own health answer.
HEALTH_PROBE_SECONDS = 2.0

Invoke = Callable[..., Any]


def status_response(
    status: status_pb2.Status, http: int | None = None, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(
        status_bytes(status),
        status_code=http if http is not None else http_status(status.code),
        media_type=JSON,
        headers=dict(headers or {}),
    )


def refusal_response(refusal: GatewayRefusal) -> Response:
    return status_response(refusal.status(), refusal.http_status, refusal.headers)


async def read_capped_body(request: Request, cap: int) -> bytes:
    """The body, refused with 413 as soon as it is known to exceed ``cap`` bytes."""

    def too_large() -> GatewayRefusal:
        return GatewayRefusal(
            code_pb2.RESOURCE_EXHAUSTED,
            REQUEST_BODY_TOO_LARGE,
            f"the request body exceeds {cap} bytes",
            http_status=413,
            metadata={"limit_bytes": str(cap)},
        )

    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise too_large()
    received = bytearray()
    async for chunk in request.stream():
        received += chunk
        if len(received) > cap:
            raise too_large()
    return bytes(received)


class Gateway:
    """The route table, one gRPC channel per hosting server, and the request handler."""

    def __init__(self, settings: GatewaySettings, routes: Sequence[Route] | None = None) -> None:
        self.settings = settings
        self.table = RouteTable(contract_routes() if routes is None else routes)
        self.openapi = json.dumps(openapi_document(self.table.routes), indent=2).encode()
        self._channels: dict[str, grpc.aio.Channel] = {}
        #: What /healthz last found missing (None: not asked yet), so that probes every half
        #: second log a change of state, not one line each.
        self._last_waiting: dict[str, str] | None = None
        self._invokers: dict[tuple[str, str], Invoke] = {}

    async def open(self) -> None:
        options = [
            ("grpc.max_receive_message_length", self.settings.max_message_bytes),
            ("grpc.max_send_message_length", self.settings.max_message_bytes),
            # Spread over every replica, keepalives, read retries (shared.runtime.transport).
            *channel_options(self.settings.transport, RETRIED_READS),
        ]
        tls = self.settings.upstream_tls
        credentials = None
        if tls is not None:
            roots, identity = tls_material(tls)
            key, chain = identity if identity else (None, None)
            # With its certificate, the gateway passes servers that require client certificates.
            credentials = grpc.ssl_channel_credentials(roots or None, key, chain)
        for server in sorted({route.server for route in self.table.routes}):
            target = resolvable(self.settings.targets[server])
            self._channels[server] = (
                grpc.aio.secure_channel(target, credentials, options=options)
                if credentials is not None
                else grpc.aio.insecure_channel(target, options=options)
            )
        for route in self.table.routes:
            channel = self._channels[route.server]
            factory = channel.unary_stream if route.server_streaming else channel.unary_unary
            self._invokers[route.http_method, route.template.text] = factory(
                route.grpc_path,
                request_serializer=lambda request: request.SerializeToString(),
                response_deserializer=route.response_class.FromString,
            )

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close(grace=None)
        self._channels.clear()

    def _invoker(self, route: Route) -> Invoke:
        return self._invokers[route.http_method, route.template.text]

    async def handle(self, request: Request) -> Response:
        try:
            return await self._transcode(request)
        except GatewayRefusal as refusal:
            return refusal_response(refusal)
        except Exception:  # a gateway bug answers as a Status, not as a plain-text page
            log.exception("%s %s failed", request.method, request.url.path)
            return status_response(
                status_pb2.Status(code=code_pb2.INTERNAL, message="internal gateway error")
            )

    async def _transcode(self, request: Request) -> Response:
        raw_path = request.scope.get("raw_path") or request.url.path.encode()
        found = self.table.find(request.method, raw_path.decode("latin-1").split("?", 1)[0])
        if not isinstance(found, Match):
            raise self._no_route(request.method, request.url.path, found)
        route = found.route
        request.scope[ROUTE_KEY] = route.template.text  # the metrics' and the span's route
        body = None
        if route.body:
            body = decode_body(await read_capped_body(request, self.settings.max_body_bytes))
        grpc_request = request_message(
            route, found.variables, request.query_params.multi_items(), body
        )
        # The request's span travels on: the services' spans join the caller's trace.
        metadata: list[tuple[str, str]] = trace_metadata()
        authorization = request.headers.get("authorization")
        if authorization is not None:
            metadata.append(("authorization", authorization))
        if route.server_streaming:
            return await self._stream(route, grpc_request, metadata)
        try:
            reply = await self._invoker(route)(
                grpc_request, metadata=metadata, timeout=self.settings.call_timeout_seconds
            )
        except grpc.aio.AioRpcError as error:
            return status_response(status_of_rpc_error(error))
        return Response(message_bytes(reply, route.response_body), media_type=JSON)

    @staticmethod
    def _no_route(method: str, path: str, allowed: tuple[str, ...]) -> GatewayRefusal:
        if not allowed:
            return GatewayRefusal(
                code_pb2.NOT_FOUND,
                ROUTE_NOT_FOUND,
                f"no route {method} {path}",
                metadata={"method": method, "path": path},
            )
        return GatewayRefusal(
            code_pb2.UNIMPLEMENTED,
            METHOD_NOT_ALLOWED,
            f"{method} is not allowed on {path} (allowed: {', '.join(allowed)})",
            http_status=405,
            metadata={"method": method, "path": path, "allowed": ",".join(allowed)},
            headers={"allow": ", ".join(allowed)},
        )

    async def _stream(
        self, route: Route, grpc_request: message.Message, metadata: list[tuple[str, str]]
    ) -> Response:
        """Newline-delimited JSON, one message a line. A refusal before the first message is an
        ordinary error response; one after it is a last line ``{"error": <Status>}``."""
        call = self._invoker(route)(grpc_request, metadata=metadata)
        replies = call.__aiter__()
        first: asyncio.Future[Any] = asyncio.ensure_future(replies.__anext__())
        done, _ = await asyncio.wait({first}, timeout=FIRST_MESSAGE_WAIT_SECONDS)
        if done and isinstance(first.exception(), grpc.aio.AioRpcError):
            error = first.exception()
            assert isinstance(error, grpc.aio.AioRpcError)
            return status_response(status_of_rpc_error(error))

        async def lines() -> AsyncIterator[bytes]:
            try:
                try:
                    yield message_bytes(await first, route.response_body) + b"\n"
                    async for reply in replies:
                        yield message_bytes(reply, route.response_body) + b"\n"
                except StopAsyncIteration:
                    return
                except grpc.aio.AioRpcError as error:
                    line = {"error": status_json(status_of_rpc_error(error))}
                    yield json.dumps(line).encode() + b"\n"
            finally:
                call.cancel()
                first.cancel()

        return StreamingResponse(lines(), media_type=NDJSON)

    async def openapi_json(self, request: Request) -> Response:
        request.scope[ROUTE_KEY] = "/openapi.json"
        return Response(self.openapi, media_type=JSON)

    async def livez(self, request: Request) -> Response:
        """200 while the process answers HTTP at all: Kubernetes' liveness, which must not follow
        the servers the gateway calls (/healthz, readiness, does)."""
        request.scope[ROUTE_KEY] = "/livez"
        return Response(b'{"status":"SERVING"}', media_type=JSON)

    async def healthz(self, request: Request) -> Response:
        """SERVING (200) only when every server the routes call answers SERVING on its own
        health check (which in turn waits for its dependencies); otherwise 503 NOT_SERVING. Only
        up or down: anyone may ask, so the servers still awaited and their addresses go to the
        log, not to the caller (issue 45 §3)."""
        request.scope[ROUTE_KEY] = "/healthz"
        servers = sorted(self._channels)
        answers = await asyncio.gather(*(self._serving(name) for name in servers))
        waiting = {
            name: self.settings.targets[name]
            for name, ok in zip(servers, answers, strict=True)
            if not ok
        }
        if waiting != self._last_waiting:
            self._last_waiting = waiting
            if waiting or not servers:
                log.warning("/healthz NOT_SERVING: waiting for %s", waiting or "a server to call")
            else:
                log.info("/healthz SERVING: every server it calls answers")
        if waiting or not servers:
            return Response(b'{"status":"NOT_SERVING"}', status_code=503, media_type=JSON)
        return Response(b'{"status":"SERVING"}', media_type=JSON)

    async def _serving(self, server: str) -> bool:
        check = self._channels[server].unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=lambda request: request.SerializeToString(),
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        try:
            reply = await check(health_pb2.HealthCheckRequest(), timeout=HEALTH_PROBE_SECONDS)
        except grpc.aio.AioRpcError:
            return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def create_app(settings: GatewaySettings, routes: Sequence[Route] | None = None) -> Starlette:
    configure_tracing("gateway")
    gateway = Gateway(settings, routes)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        await gateway.open()
        try:
            yield
        finally:
            await gateway.close()

    handler: Callable[[Request], Awaitable[Response]] = gateway.handle
    return Starlette(
        routes=[
            StarletteRoute("/openapi.json", gateway.openapi_json, methods=["GET"]),
            StarletteRoute("/healthz", gateway.healthz, methods=["GET"]),
            StarletteRoute("/livez", gateway.livez, methods=["GET"]),
            *console_routes(),  # the operator console (services/gateway/console)
            *index_routes(gateway.table.routes),  # `/` and the API root (services.gateway.index)
            StarletteRoute("/{path:path}", handler, methods=_ALL_METHODS),
        ],
        lifespan=lifespan,
        # A span, a count and a latency per request (services.gateway.observed).
        middleware=[Middleware(ObservedApp)],
    )
