"""Runtime configuration read from the environment (and overridable by command-line flags).

The limits (sizes, bounds, timeouts of the streams, threads and workers) are in
shared.runtime.limits. Every variable the services read is declared once, with its meaning, in
shared.runtime.environment, so the deploy manifests can be checked against that list
(tests/deploy). Names are stable: operators set them in Kubernetes ConfigMaps.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.runtime.limits import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_QUEUED_CALLS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_RETRY_AFTER_MS,
    seconds,
    seconds_setting,
)
from shared.runtime.limits import env_text as _env

SERVICE_NAMES = ("ledger", "reconstruction", "candidate", "admission")
DEFAULT_PORTS: Mapping[str, int] = {
    "ledger": 50051,
    "reconstruction": 50052,
    "candidate": 50053,
    "admission": 50054,
}
#: The metrics ports `make run` uses (services.runner); a service started on its own serves no
#: metrics unless FORGE_<SERVICE>_METRICS_PORT names a port (shared.runtime.metrics).
DEFAULT_METRICS_PORTS: Mapping[str, int] = {
    "ledger": 9151,
    "reconstruction": 9152,
    "candidate": 9153,
    "admission": 9154,
    "gateway": 9180,
}
#: Where the HTTP/JSON gateway listens by default, and the variable that moves it: declared beside
#: the services' ports so the client and the demo name the gateway's address without importing it.
DEFAULT_GATEWAY_PORT = 8080
GATEWAY_PORT_VARIABLE = "FORGE_GATEWAY_PORT"
DEFAULT_DATABASE_URL = "sqlite:///var/continuity.db"
DEFAULT_PRINCIPALS_FILE = "var/principals.json"
# `make run` generates a development signing key here when FORGE_SIGNING_KEY_FILE is unset.
DEFAULT_SIGNING_KEY_FILE = "var/signing-key.pem"


@dataclass(frozen=True)
class TlsSettings:
    """Server TLS material; client_ca set means mutual TLS. ``ca_file`` verifies the servers this
    service calls (default: client_ca_file, else the system's roots)."""

    cert_file: str
    key_file: str
    client_ca_file: str = ""
    ca_file: str = ""


@dataclass(frozen=True)
class ClientTls:
    """TLS as a caller speaks it (the Python client, the CLI, the worker, the gateway's
    channels): ``ca_file`` verifies the servers (empty: the system's roots); ``cert_file`` and
    ``key_file``, both or neither, are the caller's own certificate for mutual TLS."""

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""

    def __post_init__(self) -> None:
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("a client certificate needs its key: set both (FORGE_TLS_CERT/KEY)")

    def unreadable(self) -> list[str]:
        """The files named here that this process cannot read (a start-up check: each is read
        only when a channel opens)."""
        named = (self.ca_file, self.cert_file, self.key_file)
        return [path for path in named if path and not os.access(path, os.R_OK)]


def client_tls(
    env: Mapping[str, str], *, ca_file: str = "", cert_file: str = "", key_file: str = ""
) -> ClientTls | None:
    """The caller's TLS from the arguments (flags), else FORGE_TLS_CA / FORGE_TLS_CERT /
    FORGE_TLS_KEY; None (plaintext) when none of them is set."""
    tls = ClientTls(
        ca_file or env.get("FORGE_TLS_CA", ""),
        cert_file or env.get("FORGE_TLS_CERT", ""),
        key_file or env.get("FORGE_TLS_KEY", ""),
    )
    return tls if (tls.ca_file or tls.cert_file or tls.key_file) else None


@dataclass(frozen=True)
class DatabaseSettings:
    """How the ledger connects to PostgreSQL (SQLite ignores these). The timeouts are set on each
    server session when it opens; with ``server_prepares`` off (a transaction-mode pooler such as
    PgBouncer is between) per transaction (``SET LOCAL``) instead, so they hold there too; a
    timeout of 0 leaves the server's own setting in force. docs/architecture.md, "Running
    several ledger replicas", sizes them."""

    pool_size: int = 10
    max_overflow: int = 40
    server_prepares: bool = True
    lock_timeout_ms: int = 5_000
    statement_timeout_ms: int = 30_000
    # Bounds how long a frozen or partitioned replica can keep a lock: the server ends its
    # session this long after its last statement (ADR 0042). No ledger transaction that locks
    # waits for anything but the database.
    idle_in_transaction_timeout_ms: int = 5_000
    # A streamed snapshot's read transaction (it locks no row) waits for its reader to take the
    # next message: it gets this longer limit instead, for itself only.
    idle_in_stream_timeout_ms: int = 60_000
    keepalive_idle_seconds: int = 30

    def __post_init__(self) -> None:
        if self.pool_size < 1:
            raise ValueError(f"the database pool size must be at least 1, not {self.pool_size}")
        for name in (
            "max_overflow",
            "lock_timeout_ms",
            "statement_timeout_ms",
            "idle_in_transaction_timeout_ms",
            "idle_in_stream_timeout_ms",
            "keepalive_idle_seconds",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, not {getattr(self, name)}")


# The variable behind each DatabaseSettings field.
DATABASE_VARIABLES: Mapping[str, str] = {
    "pool_size": "FORGE_DB_POOL_SIZE",
    "max_overflow": "FORGE_DB_MAX_OVERFLOW",
    "server_prepares": "FORGE_DB_SERVER_PREPARES",
    "lock_timeout_ms": "FORGE_DB_LOCK_TIMEOUT_MS",
    "statement_timeout_ms": "FORGE_DB_STATEMENT_TIMEOUT_MS",
    "idle_in_transaction_timeout_ms": "FORGE_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS",
    "idle_in_stream_timeout_ms": "FORGE_DB_IDLE_IN_STREAM_TIMEOUT_MS",
    "keepalive_idle_seconds": "FORGE_DB_KEEPALIVE_IDLE_SECONDS",
}
_SWITCH = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}


def database_settings(env: Mapping[str, str] | None = None) -> DatabaseSettings:
    """DatabaseSettings from the FORGE_DB_* variables; an unset one keeps its default, a
    malformed one is a ValueError naming the variable (the process refuses to start)."""
    env = os.environ if env is None else env
    values: dict[str, int | bool] = {}
    for name, variable in DATABASE_VARIABLES.items():
        text = env.get(variable, "").strip()
        if not text:
            continue
        if name == "server_prepares":
            if text.lower() not in _SWITCH:
                raise ValueError(f"{variable} must be on or off, not {text!r}")
            values[name] = _SWITCH[text.lower()]
            continue
        try:
            number = int(text)
        except ValueError:
            raise ValueError(f"{variable} must be an integer, not {text!r}") from None
        least = 1 if name == "pool_size" else 0
        if number < least:
            raise ValueError(f"{variable} must be at least {least}, not {number}")
        values[name] = number
    return DatabaseSettings(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class TransportSettings:
    """How gRPC connections are kept and recycled (docs/architecture.md, "Running several
    replicas"). Clients ping an idle connection so a dead peer is noticed, and spread calls over
    every address the target resolves to; servers close each connection after a maximum age so
    clients re-resolve and new replicas get traffic, and tolerate client pings no more often than
    ``min_ping_interval_ms``. Idempotent reads are retried on UNAVAILABLE (and a busy server's
    SERVER_BUSY) up to ``read_retry_attempts`` attempts in all (1 disables; gRPC caps it at 5),
    throttled by ``retry_tokens``."""

    keepalive_time_ms: int = 30_000
    keepalive_timeout_ms: int = 10_000
    max_connection_age_ms: int = 300_000
    max_connection_age_grace_ms: int = 30_000
    min_ping_interval_ms: int = 10_000
    read_retry_attempts: int = 3
    # gRPC's own ceiling is 120 s: a replica back after a restart would wait that long for a
    # caller whose every address had failed (calls fail fast UNAVAILABLE meanwhile).
    max_reconnect_backoff_ms: int = 5_000
    #: gRPC retry throttling per channel: a failed attempt costs a token, a success earns 0.1,
    #: and retries stop while half or fewer remain.
    retry_tokens: int = 10

    def __post_init__(self) -> None:
        for name in TRANSPORT_VARIABLES:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if not 1 <= self.read_retry_attempts <= 5:
            raise ValueError(f"read_retry_attempts must be in 1..5, not {self.read_retry_attempts}")
        if self.keepalive_time_ms < self.min_ping_interval_ms:
            # A server answers pings more frequent than its minimum with GOAWAY ("too_many_pings").
            raise ValueError(
                f"keepalive_time_ms ({self.keepalive_time_ms}) must not be below "
                f"min_ping_interval_ms ({self.min_ping_interval_ms})"
            )


# The variable behind each TransportSettings field.
TRANSPORT_VARIABLES: Mapping[str, str] = {
    "keepalive_time_ms": "FORGE_GRPC_KEEPALIVE_TIME_MS",
    "keepalive_timeout_ms": "FORGE_GRPC_KEEPALIVE_TIMEOUT_MS",
    "max_connection_age_ms": "FORGE_GRPC_MAX_CONNECTION_AGE_MS",
    "max_connection_age_grace_ms": "FORGE_GRPC_MAX_CONNECTION_AGE_GRACE_MS",
    "min_ping_interval_ms": "FORGE_GRPC_MIN_PING_INTERVAL_MS",
    "read_retry_attempts": "FORGE_GRPC_READ_RETRY_ATTEMPTS",
    "max_reconnect_backoff_ms": "FORGE_GRPC_MAX_RECONNECT_BACKOFF_MS",
    "retry_tokens": "FORGE_GRPC_RETRY_TOKENS",
}


def _integers(env: Mapping[str, str], variables: Mapping[str, str]) -> dict[str, int]:
    values: dict[str, int] = {}
    for name, variable in variables.items():
        text = env.get(variable, "").strip()
        if text:
            try:
                values[name] = int(text)
            except ValueError:
                raise ValueError(f"{variable} must be an integer, not {text!r}") from None
    return values


def transport_settings(env: Mapping[str, str] | None = None) -> TransportSettings:
    """TransportSettings from the FORGE_GRPC_* variables; an unset one keeps its default, a
    malformed or out-of-range one is a ValueError (the process refuses to start)."""
    env = os.environ if env is None else env
    try:
        return TransportSettings(**_integers(env, TRANSPORT_VARIABLES))
    except ValueError as error:
        raise ValueError(f"FORGE_GRPC_*: {error}") from None


#: How often, at most, a process looks at the principals file for a change (seconds).
DEFAULT_PRINCIPALS_RELOAD_SECONDS = 2.0


@dataclass(frozen=True)
class Settings:
    """Everything one service process needs to start."""

    service: str
    host: str
    port: int
    database_url: str = DEFAULT_DATABASE_URL
    principals_file: str = DEFAULT_PRINCIPALS_FILE
    service_token: str = ""
    targets: Mapping[str, str] = field(default_factory=dict)
    tls: TlsSettings | None = None
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    #: The request limit of a method that uploads no bytes (shared.runtime.gate).
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    #: Calls queued beyond the busy threads before SERVER_BUSY, and the retry delay it asks.
    max_queued_calls: int = DEFAULT_MAX_QUEUED_CALLS
    retry_after_ms: int = DEFAULT_RETRY_AFTER_MS
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    log_level: str = "INFO"
    database: DatabaseSettings = field(default_factory=DatabaseSettings)
    #: The Prometheus /metrics port; 0: no endpoint (shared.runtime.metrics), on this address.
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"
    transport: TransportSettings = field(default_factory=TransportSettings)
    #: A plaintext port serving only grpc.health.v1 (0: none), for probes that cannot speak TLS.
    health_port: int = 0
    principals_reload_seconds: float = DEFAULT_PRINCIPALS_RELOAD_SECONDS

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def port_variable(service: str) -> str:
    return f"FORGE_{service.upper()}_PORT"


def metrics_port_variable(service: str) -> str:
    return f"FORGE_{service.upper()}_METRICS_PORT"


def metrics_host(env: Mapping[str, str] | None = None) -> str:
    """FORGE_METRICS_HOST: where /metrics listens; loopback unless a deployment that scrapes from
    another host says otherwise (the service's own FORGE_HOST does not open it to the network)."""
    env = os.environ if env is None else env
    return env.get("FORGE_METRICS_HOST", "").strip() or "127.0.0.1"


def metrics_port(service: str, env: Mapping[str, str] | None = None) -> int:
    """FORGE_<SERVICE>_METRICS_PORT; unset, empty or 0: no metrics endpoint."""
    env = os.environ if env is None else env
    variable = metrics_port_variable(service)
    text = env.get(variable, "").strip() or "0"
    try:
        port = int(text)
    except ValueError:
        raise ValueError(f"{variable} must be a port number, not {text!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"{variable} must be in 0..65535, not {port}")
    return port


def target_variable(service: str) -> str:
    return f"FORGE_{service.upper()}_TARGET"


def load_settings(
    service: str, argv: list[str] | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Settings for ``service`` from flags (highest precedence), then environment, then defaults."""
    if service not in SERVICE_NAMES:
        raise ValueError(f"unknown service {service!r}")
    env = os.environ if env is None else env
    parser = argparse.ArgumentParser(prog=f"python -m services.{service}")
    parser.add_argument("--host", default=_env(env, "FORGE_HOST", "127.0.0.1"))
    parser.add_argument(
        "--port",
        type=int,
        default=int(_env(env, port_variable(service), str(DEFAULT_PORTS[service]))),
    )
    parser.add_argument(
        "--database-url", default=_env(env, "FORGE_DATABASE_URL", DEFAULT_DATABASE_URL)
    )
    parser.add_argument(
        "--principals-file", default=_env(env, "FORGE_PRINCIPALS_FILE", DEFAULT_PRINCIPALS_FILE)
    )
    args = parser.parse_args(argv or [])
    host = args.host
    targets = {
        name: _env(env, target_variable(name), f"127.0.0.1:{DEFAULT_PORTS[name]}")
        for name in SERVICE_NAMES
        if name != service
    }
    cert, key = env.get("FORGE_TLS_CERT", ""), env.get("FORGE_TLS_KEY", "")
    tls = (
        TlsSettings(cert, key, env.get("FORGE_TLS_CLIENT_CA", ""), env.get("FORGE_TLS_CA", ""))
        if cert and key
        else None
    )
    return Settings(
        service=service,
        host=host,
        port=args.port,
        database_url=args.database_url,
        principals_file=args.principals_file,
        service_token=_service_token(env),
        targets=targets,
        tls=tls,
        max_message_bytes=int(_env(env, "FORGE_MAX_MESSAGE_BYTES", str(DEFAULT_MAX_MESSAGE_BYTES))),
        max_request_bytes=int(_env(env, "FORGE_MAX_REQUEST_BYTES", str(DEFAULT_MAX_REQUEST_BYTES))),
        max_queued_calls=int(_env(env, "FORGE_MAX_QUEUED_CALLS", str(DEFAULT_MAX_QUEUED_CALLS))),
        retry_after_ms=int(_env(env, "FORGE_RETRY_AFTER_MS", str(DEFAULT_RETRY_AFTER_MS))),
        grace_seconds=seconds(env, "FORGE_GRACE_SECONDS", DEFAULT_GRACE_SECONDS),
        log_level=_env(env, "FORGE_LOG_LEVEL", "INFO"),
        database=database_settings(env),
        metrics_port=metrics_port(service, env),
        metrics_host=metrics_host(env),
        transport=transport_settings(env),
        health_port=int(_env(env, "FORGE_HEALTH_PORT", "0")),
        principals_reload_seconds=_reload_seconds(env),
    )


def _service_token(env: Mapping[str, str]) -> str:
    """FORGE_SERVICE_TOKEN_FILE's content (a Secret mounted as a file), else FORGE_SERVICE_TOKEN."""
    path = env.get("FORGE_SERVICE_TOKEN_FILE", "")
    if path:
        with open(path, encoding="utf-8") as token:
            return token.read().strip()
    return env.get("FORGE_SERVICE_TOKEN", "")


def _reload_seconds(env: Mapping[str, str]) -> float:
    return seconds_setting(
        env, "FORGE_PRINCIPALS_RELOAD_SECONDS", DEFAULT_PRINCIPALS_RELOAD_SECONDS, 300
    )
