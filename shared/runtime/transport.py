"""How calls travel between replicas: every channel spreads its calls over all the addresses its
target resolves to (round_robin), keeps its connections alive, and retries idempotent reads that
fail UNAVAILABLE; every server recycles its connections after a maximum age so clients re-resolve
and new replicas get traffic. Settings: shared.runtime.config.TransportSettings.

Only the reads a channel is given are retried automatically (which RPCs they are is a fact of
the contract: shared.contract.channels passes them). A write is never
retried by the channel: a write whose outcome is unknown is repeated by its caller with the same
request id, which the ledger answers with the saved outcome (ADR 0003).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from shared.runtime.config import TransportSettings

#: One RPC whose calls a channel may retry: (full service name, method name).
RetriedRead = tuple[str, str]


def _names(retried_reads: Iterable[RetriedRead]) -> list[dict[str, str]]:
    return [{"service": service, "method": method} for service, method in retried_reads]


#: Tokens a success earns back (gRPC's throttling: a failure costs one).
RETRY_TOKEN_RATIO = 0.1


def service_config(
    transport: TransportSettings, retried_reads: Iterable[RetriedRead] = ()
) -> dict[str, Any]:
    """The gRPC service config every channel uses: round_robin over every resolved address, and
    the retry policy of ``retried_reads`` (only when more than one attempt is allowed and there
    are reads to retry). A read is retried on
    UNAVAILABLE, and on RESOURCE_EXHAUSTED after the delay a busy server asks for (SERVER_BUSY;
    every other RESOURCE_EXHAUSTED says "do not retry", shared.runtime.gate). Retries are
    throttled: once failures use up half the tokens, a channel stops retrying until successes
    earn them back, so clients of a struggling service do not multiply its load."""
    config: dict[str, Any] = {
        "loadBalancingConfig": [{"round_robin": {}}],
        "retryThrottling": {
            "maxTokens": transport.retry_tokens,
            "tokenRatio": RETRY_TOKEN_RATIO,
        },
    }
    reads = _names(retried_reads)
    if transport.read_retry_attempts > 1 and reads:
        config["methodConfig"] = [
            {
                "name": reads,
                "retryPolicy": {
                    "maxAttempts": transport.read_retry_attempts,
                    "initialBackoff": "0.1s",
                    "maxBackoff": "1s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"],
                },
            }
        ]
    return config


def channel_options(
    transport: TransportSettings, retried_reads: Iterable[RetriedRead] = ()
) -> list[tuple[str, Any]]:
    return [
        ("grpc.service_config", json.dumps(service_config(transport, retried_reads))),
        ("grpc.enable_retries", 1),
        ("grpc.keepalive_time_ms", transport.keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", transport.keepalive_timeout_ms),
        # Keep pinging while idle, so a replica gone away is noticed before the next call.
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        # Connections of this channel only: round_robin reconnects at once when a server goes
        # away, so a connection shared through gRPC's process-wide pool with a channel opened
        # later to the same address (a new server there) would make that channel fail fast until
        # the backoff passed.
        ("grpc.use_local_subchannel_pool", 1),
        # A replica back from a restart is tried again within this bound.
        ("grpc.max_reconnect_backoff_ms", transport.max_reconnect_backoff_ms),
        ("grpc.initial_reconnect_backoff_ms", min(1_000, transport.max_reconnect_backoff_ms)),
    ]


def server_options(transport: TransportSettings) -> list[tuple[str, Any]]:
    return [
        ("grpc.max_connection_age_ms", transport.max_connection_age_ms),
        ("grpc.max_connection_age_grace_ms", transport.max_connection_age_grace_ms),
        ("grpc.keepalive_time_ms", transport.keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", transport.keepalive_timeout_ms),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", transport.min_ping_interval_ms),
        ("grpc.http2.min_ping_interval_without_data_ms", transport.min_ping_interval_ms),
        ("grpc.http2.max_ping_strikes", 2),
    ]


_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "vsock:", "xds:")


def resolvable(target: str) -> str:
    """``host:port`` as a ``dns:///host:port`` target, so every address the name resolves to is
    used (a Kubernetes headless Service resolves to every ready pod); a target that names its
    resolver already is kept."""
    return target if target.startswith(_SCHEMES) else f"dns:///{target}"
