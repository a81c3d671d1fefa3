"""The metrics module's own parts: the reason read back from a refusal's status details, the
scrape-time sources (one failing source leaves the rest in the scrape), the endpoint and its
port setting."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import grpc
import pytest
from prometheus_client import REGISTRY, generate_latest

from services.gateway.config import load_gateway_settings
from shared.runtime.config import load_settings, metrics_port
from shared.runtime.errors import NotFound, ResourceExhausted, to_status
from shared.runtime.metrics import (
    ZERO_OUTCOMES,
    counted,
    export_at_scrape,
    gauge_family,
    reason_of,
    serve_metrics,
)
from tests.polyglot.process import _free_port


def test_the_reason_is_read_back_from_the_status_details() -> None:
    refusal = ResourceExhausted("PENDING_TICKET_LIMIT", "full", metadata={"limit": "4"})
    assert reason_of(to_status(refusal).trailing_metadata) == "PENDING_TICKET_LIMIT"
    assert reason_of(to_status(NotFound("RUN_NOT_FOUND", "no")).trailing_metadata) == (
        "RUN_NOT_FOUND"
    )
    assert reason_of([("other", "x")]) == "" and reason_of(None) == ""
    assert reason_of([("grpc-status-details-bin", b"\xff not a status")]) == ""


@pytest.fixture
def sources() -> Iterator[None]:
    yield
    export_at_scrape("test_good", lambda: ())
    export_at_scrape("test_bad", lambda: ())


def test_a_failing_source_is_left_out_of_one_scrape_only(sources: None) -> None:
    def failing() -> Iterator[object]:
        raise RuntimeError("the database does not answer")
        yield  # pragma: no cover

    export_at_scrape("test_good", lambda: [gauge_family("forge_test_good", "a gauge", 3.0)])
    export_at_scrape("test_bad", failing)  # type: ignore[arg-type]
    text = generate_latest(REGISTRY).decode()
    assert "forge_test_good 3.0" in text
    # A later registration under the same key replaces the failing one.
    export_at_scrape("test_bad", lambda: [gauge_family("forge_test_bad", "now fine", 1.0)])
    assert "forge_test_bad 1.0" in generate_latest(REGISTRY).decode()


def test_the_endpoint_serves_the_registry_and_port_0_is_off() -> None:
    assert serve_metrics("127.0.0.1", 0) is None
    endpoint = serve_metrics("127.0.0.1", _free_port())
    assert endpoint is not None
    try:
        url = f"http://127.0.0.1:{endpoint.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as reply:
            assert b"# TYPE forge_grpc_server_handled_total counter" in reply.read()
    finally:
        endpoint.stop()


def test_the_metrics_port_setting() -> None:
    assert metrics_port("ledger", {}) == 0
    assert metrics_port("ledger", {"FORGE_LEDGER_METRICS_PORT": "9151"}) == 9151
    assert metrics_port("gateway", {"FORGE_GATEWAY_METRICS_PORT": " "}) == 0
    for bad in ("x", "70000", "-1"):
        with pytest.raises(ValueError, match="FORGE_LEDGER_METRICS_PORT"):
            metrics_port("ledger", {"FORGE_LEDGER_METRICS_PORT": bad})


EVERY_ADDRESS = "0.0.0.0"  # noqa: S104 - settings read back, nothing binds to it here


def test_metrics_listen_on_loopback_unless_configured() -> None:
    # A service bound to every address still keeps its metrics on loopback (issue 45 §3).
    exposed = {"FORGE_HOST": EVERY_ADDRESS, "FORGE_LEDGER_METRICS_PORT": str(_free_port())}
    for settings in (
        load_settings("ledger", [], exposed),
        load_gateway_settings([], {**exposed, "FORGE_GATEWAY_METRICS_PORT": "9180"}),
    ):
        assert settings.host == EVERY_ADDRESS
        assert settings.metrics_host == "127.0.0.1"
    service = load_settings("ledger", [], exposed)
    endpoint = serve_metrics(service.metrics_host, service.metrics_port)
    assert endpoint is not None
    try:
        assert endpoint.server.server_address[0] == "127.0.0.1"
    finally:
        endpoint.stop()
    chosen = load_settings("ledger", [], {**exposed, "FORGE_METRICS_HOST": EVERY_ADDRESS})
    assert chosen.metrics_host == EVERY_ADDRESS


def test_every_served_method_counts_the_outcomes_alerts_read_from_zero() -> None:
    """A process's first INTERNAL or database timeout is a change from 0 that rate() sees, not
    a new series with no earlier sample (issue 46 §3)."""
    handler = grpc.unary_unary_rpc_method_handler(lambda request, _context: request)
    counted("/forge.test.v1.ZeroService/Ping", handler)
    text = generate_latest(REGISTRY).decode()
    for code, reason in ZERO_OUTCOMES:
        labels = (
            f'grpc_code="{code}",grpc_method="Ping",'
            f'grpc_service="forge.test.v1.ZeroService",reason="{reason}"'
        )
        series = "forge_grpc_server_handled_total{" + labels + "} 0.0"
        assert series in text
    assert {("INTERNAL", "INTERNAL_ERROR"), ("UNAVAILABLE", "DATABASE_TIMEOUT")} <= set(
        ZERO_OUTCOMES
    )
