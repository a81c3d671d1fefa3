"""The one periodic schedule behind the expiry sweep, the database clock and the readiness probe:
a failed round is logged and the schedule goes on; the interval is asked anew each round; stop
ends it."""

from __future__ import annotations

import logging
import threading

import pytest

from shared.runtime.periodic import Periodic

log = logging.getLogger("forge.test.periodic")


def test_a_failed_round_is_logged_and_the_next_round_runs(caplog: pytest.LogCaptureFixture) -> None:
    rounds: list[int] = []
    third = threading.Event()

    def action() -> None:
        rounds.append(len(rounds))
        if len(rounds) == 1:
            raise RuntimeError("the database did not answer")
        if len(rounds) == 3:
            third.set()

    schedule = Periodic("test", action, lambda: 0.01, failure="round failed", log=log)
    with caplog.at_level(logging.ERROR, logger=log.name):
        schedule.start()
        assert third.wait(5)
        schedule.stop()
    assert rounds[:3] == [0, 1, 2]
    assert [record.message for record in caplog.records] == ["round failed"]
    assert caplog.records[0].exc_info is not None


def test_first_now_runs_before_the_first_wait_and_stop_ends_the_schedule() -> None:
    ran = threading.Event()
    calls: list[int] = []

    def action() -> None:
        calls.append(1)
        ran.set()

    # An hour between rounds: only the first, immediate round can run before stop.
    schedule = Periodic("test", action, lambda: 3600.0, failure="-", log=log, first_now=True)
    schedule.start()
    assert ran.wait(5)
    schedule.stop(timeout=5)
    assert calls == [1]


def test_the_interval_is_asked_before_every_wait() -> None:
    asked: list[int] = []
    enough = threading.Event()

    def interval() -> float:
        asked.append(1)
        if len(asked) >= 3:
            enough.set()
        return 0.01

    schedule = Periodic("test", lambda: None, interval, failure="-", log=log)
    schedule.start()
    assert enough.wait(5)
    schedule.stop()
    assert len(asked) >= 3
