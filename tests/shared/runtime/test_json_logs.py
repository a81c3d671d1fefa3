"""FORGE_LOG_FORMAT=json: one JSON object per line, with the active span's trace and span ids,
the served request's ids and an event's fields; a malformed format stops the process."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from forge.continuity.v1 import ledger_pb2
from shared.runtime.events import configure_logging, log_format, record_event
from shared.runtime.log_context import bind_request_ids


@pytest.fixture
def json_log(tmp_path: Path) -> Iterator[Path]:
    """The root logger writing JSON to a file (restored afterwards)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    path = tmp_path / "service.log"
    configure_logging("INFO", {"FORGE_LOG_FILE": str(path), "FORGE_LOG_FORMAT": "json"})
    yield path
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def lines(path: Path) -> list[dict[str, object]]:
    for handler in logging.getLogger().handlers:
        handler.flush()
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_line_under_an_active_span_carries_its_trace_and_span_ids(json_log: Path) -> None:
    # The SDK's own tracer (not the process provider, which records only while exporting).
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("handling") as span:
        logging.getLogger("forge.test").warning("inside %s", "the span")
    logging.getLogger("forge.test").info("outside")
    inside, outside = lines(json_log)
    context = span.get_span_context()
    assert inside["trace_id"] == format(context.trace_id, "032x")
    assert inside["span_id"] == format(context.span_id, "016x")
    assert inside["message"] == "inside the span"
    assert (inside["level"], inside["logger"]) == ("WARNING", "forge.test")
    assert str(inside["timestamp"]).endswith("+00:00")
    assert "trace_id" not in outside and "span_id" not in outside


def test_the_served_request_ids_and_an_events_fields_are_fields(json_log: Path) -> None:
    request = ledger_pb2.GetAdmissionRequest(run_id="run-7", request_id="req-7")
    with bind_request_ids(request):
        logging.getLogger("forge.server").info("refused something")
    record_event("claim", actor="walt-worker", outcome="claimed", run_id="run-8", lease=2)
    logging.getLogger("forge.test").info("after the call")
    served, event, after = lines(json_log)
    assert (served["run_id"], served["request_id"]) == ("run-7", "req-7")
    assert event["event"] == "claim" and event["actor"] == "walt-worker"
    assert (event["run_id"], event["lease"], event["outcome"]) == ("run-8", "2", "claimed")
    assert "run_id" not in after


def test_an_exception_is_one_line_too(json_log: Path) -> None:
    try:
        raise ValueError("boom\nwith a second line")
    except ValueError:
        logging.getLogger("forge.test").exception("failed")
    (line,) = lines(json_log)
    assert "ValueError: boom" in str(line["exception"])


def test_the_format_is_text_or_json() -> None:
    assert log_format({}) == "text"
    assert log_format({"FORGE_LOG_FORMAT": "JSON"}) == "json"
    with pytest.raises(ValueError, match="FORGE_LOG_FORMAT"):
        log_format({"FORGE_LOG_FORMAT": "xml"})
