"""A service process stops on SIGTERM whichever of its threads the kernel hands the signal to, and
writes every thread's stack to its log on SIGUSR1 without stopping (shared.runtime.stop_signal,
shared.runtime.bootstrap).

A process-directed signal may be delivered to any thread that does not block it: gRPC's, the
handler pool's, the readiness thread. Python runs the handler only when the main thread next runs
bytecode, so a main thread blocked without a timeout ignored such a signal for good; the CI saw a
ledger that did not stop within 15 s of SIGTERM and logged nothing. These tests hand the signal
to a thread other than the main one on purpose (tgkill), which the old code never answered.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path

from services.ledger.database import migrate
from shared.runtime.bootstrap import STACKS_SIGNAL
from shared.runtime.readiness import SERVING
from tests.polyglot.process import health_status, running_ledger

# How long the stacks may take to reach the log.
STACKS_SECONDS = 10.0


def _other_threads(pid: int) -> list[int]:
    """The ids of ``pid``'s threads other than its main thread (whose id is ``pid``)."""
    return sorted(int(tid) for tid in os.listdir(f"/proc/{pid}/task") if int(tid) != pid)


def _to_another_thread(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to one thread of ``process`` that is not its main thread."""
    libc = ctypes.CDLL(None, use_errno=True)
    threads = _other_threads(process.pid)
    assert threads, "the service runs more than one thread"
    if libc.tgkill(process.pid, threads[0], signal.SIGTERM) != 0:
        raise OSError(ctypes.get_errno(), "tgkill")


def test_sigterm_handed_to_a_thread_other_than_the_main_one_stops_the_ledger_cleanly(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/continuity.db"
    migrate(url)
    # The harness requires exit code 0 within its shutdown limit after _to_another_thread.
    with running_ledger(url, tmp_path, send_stop=_to_another_thread) as ledger:
        assert health_status(ledger.target) == SERVING
    log = ledger.log()
    assert "signal 15: draining" in log
    assert "ledger stopped" in log


def test_sigusr1_writes_every_threads_stack_to_the_log_and_the_ledger_keeps_serving(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/continuity.db"
    migrate(url)
    with running_ledger(url, tmp_path) as ledger:
        ledger.process.send_signal(STACKS_SIGNAL)
        deadline = time.monotonic() + STACKS_SECONDS
        while "serve_until_signalled" not in ledger.log() and time.monotonic() < deadline:
            time.sleep(0.1)
        log = ledger.log()
        # Every thread: the main one waits for a stop signal, the readiness thread (on the
        # shared periodic schedule) follows the database.
        assert "most recent call first" in log
        assert "serve_until_signalled" in log
        assert "periodic.py" in log
        assert health_status(ledger.target) == SERVING
