"""One line per committed state change, on stdout and in the shared log file."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.runtime.events import configure_logging, event_line, record_event


@pytest.fixture
def restored_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def test_an_event_is_one_line_of_key_value_pairs() -> None:
    line = event_line(
        "admission",
        "olga-operator",
        "queued",
        {"run_id": "run-1", "request_id": "req 1", "execution_request_id": ""},
    )
    assert (
        line == "event=admission actor=olga-operator run_id=run-1 request_id='req 1' outcome=queued"
    )
    assert "\n" not in event_line("x", "a", "line\nbreak", {})


def test_events_go_to_stdout_and_to_the_log_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], restored_logging: None
) -> None:
    path = tmp_path / "var" / "continuity.log"
    configure_logging("INFO", {"FORGE_LOG_FILE": str(path)})
    record_event("claim", actor="walt-worker", outcome="claimed", run_id="run-1")
    logging.getLogger().handlers[-1].flush()
    expected = "event=claim actor=walt-worker run_id=run-1 outcome=claimed"
    assert expected in capsys.readouterr().out
    assert [line for line in path.read_text().splitlines() if expected in line] != []
