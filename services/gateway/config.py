"""The gateway's settings: where it listens, which gRPC server hosts each service, body cap."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from ssl import CERT_REQUIRED

from services.gateway.routes import contract_routes
from shared.runtime.config import (
    DEFAULT_GATEWAY_PORT,
    DEFAULT_PORTS,
    GATEWAY_PORT_VARIABLE,
    ClientTls,
    TransportSettings,
    metrics_host,
    metrics_port,
    target_variable,
    transport_settings,
)
from shared.runtime.limits import (
    DEFAULT_DOWNSTREAM_TIMEOUT_SECONDS,
    DEFAULT_GRACE_SECONDS,
    DEFAULT_MAX_MESSAGE_BYTES,
    seconds,
)

GATEWAY = "gateway"
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
MAX_BODY_VARIABLE = "FORGE_GATEWAY_MAX_BODY_BYTES"
# One line per HTTP request drowns the one line per state change the services log: off unless
# this is set to 1/true/yes (the request metrics and spans count every request anyway).
ACCESS_LOG_VARIABLE = "FORGE_GATEWAY_ACCESS_LOG"
# The gRPC servers the gateway calls: those hosting a method with an http rule.
SERVERS: tuple[str, ...] = tuple(sorted({route.server for route in contract_routes()}))


@dataclass(frozen=True)
class GatewaySettings:
    host: str = "127.0.0.1"
    port: int = DEFAULT_GATEWAY_PORT
    targets: Mapping[str, str] = field(
        default_factory=lambda: {name: f"127.0.0.1:{DEFAULT_PORTS[name]}" for name in SERVERS}
    )
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    call_timeout_seconds: float = DEFAULT_DOWNSTREAM_TIMEOUT_SECONDS
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    log_level: str = "INFO"
    #: The Prometheus /metrics port; 0: no endpoint (FORGE_GATEWAY_METRICS_PORT).
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"
    #: PEM CA bundle that verifies the gRPC servers (FORGE_TLS_CA); empty: plaintext to them,
    #: unless the gateway has a certificate (then the system's roots verify them).
    tls_ca_file: str = ""
    #: The gateway's certificate and key (FORGE_TLS_CERT / FORGE_TLS_KEY): its HTTPS listener's,
    #: and the client certificate it presents to servers that require one (mutual TLS).
    tls_cert_file: str = ""
    tls_key_file: str = ""
    #: PEM CA bundle; when set, HTTPS callers must present a certificate it signed
    #: (FORGE_TLS_CLIENT_CA). Unset in the deployments: browsers reach the console.
    tls_client_ca_file: str = ""
    transport: TransportSettings = field(default_factory=TransportSettings)
    #: uvicorn's access line per request (FORGE_GATEWAY_ACCESS_LOG); off by default.
    access_log: bool = False

    @property
    def upstream_tls(self) -> ClientTls | None:
        """TLS to the gRPC servers: with the CA, or the gateway's own certificate, set."""
        if not (self.tls_ca_file or self.tls_cert_file):
            return None
        return ClientTls(self.tls_ca_file, self.tls_cert_file, self.tls_key_file)

    def uvicorn_tls(self) -> dict[str, object]:
        """uvicorn's TLS arguments: none (plain HTTP), a certificate, and client certificates
        required when a client CA is set."""
        if not self.tls_cert_file:
            return {}
        arguments: dict[str, object] = {
            "ssl_certfile": self.tls_cert_file,
            "ssl_keyfile": self.tls_key_file,
        }
        if self.tls_client_ca_file:
            arguments |= {"ssl_ca_certs": self.tls_client_ca_file, "ssl_cert_reqs": CERT_REQUIRED}
        return arguments


def _env(env: Mapping[str, str], name: str, default: str) -> str:
    value = env.get(name, "")
    return value if value != "" else default


def load_gateway_settings(
    argv: list[str] | None = None, env: Mapping[str, str] | None = None
) -> GatewaySettings:
    """Flags, then the environment (the same FORGE_* variables the services read), then defaults."""
    env = os.environ if env is None else env
    parser = argparse.ArgumentParser(prog="python -m services.gateway")
    parser.add_argument("--host", default=_env(env, "FORGE_HOST", "127.0.0.1"))
    parser.add_argument(
        "--port", type=int, default=int(_env(env, GATEWAY_PORT_VARIABLE, str(DEFAULT_GATEWAY_PORT)))
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=int(_env(env, MAX_BODY_VARIABLE, str(DEFAULT_MAX_BODY_BYTES))),
    )
    args = parser.parse_args(argv or [])
    return GatewaySettings(
        host=args.host,
        port=args.port,
        targets={
            name: _env(env, target_variable(name), f"127.0.0.1:{DEFAULT_PORTS[name]}")
            for name in SERVERS
        },
        max_body_bytes=args.max_body_bytes,
        max_message_bytes=int(_env(env, "FORGE_MAX_MESSAGE_BYTES", str(DEFAULT_MAX_MESSAGE_BYTES))),
        grace_seconds=seconds(env, "FORGE_GRACE_SECONDS", DEFAULT_GRACE_SECONDS),
        log_level=_env(env, "FORGE_LOG_LEVEL", "INFO"),
        metrics_port=metrics_port(GATEWAY, env),
        metrics_host=metrics_host(env),
        tls_ca_file=env.get("FORGE_TLS_CA", ""),
        tls_cert_file=env.get("FORGE_TLS_CERT", ""),
        tls_key_file=env.get("FORGE_TLS_KEY", ""),
        tls_client_ca_file=env.get("FORGE_TLS_CLIENT_CA", ""),
        transport=transport_settings(env),
        access_log=_env(env, ACCESS_LOG_VARIABLE, "").lower() in {"1", "true", "yes"},
    )
