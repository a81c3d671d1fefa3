"""The ledger's scheduled expiry sweep (ADR 0039): a daemon thread that, every
FORGE_EXPIRY_SWEEP_SECONDS, expires the queued requests whose lease ran out, so an expired
request frees its place in the caps and its never-claimed recovery on time, not at the next
admission. Replicas sharing one PostgreSQL take turns through an advisory lock
(``Ledger.sweep_expired``); a failed round is logged and the next one tries again."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

_log = logging.getLogger("forge.ledger.expiry")


class ExpirySweeper:
    """Calls ``sweep`` every ``interval`` seconds from :meth:`start` until :meth:`stop`."""

    def __init__(self, sweep: Callable[[], object], interval: float) -> None:
        self._sweep = sweep
        self._interval = interval
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="expiry-sweep", daemon=True)

    def start(self) -> ExpirySweeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        while not self._stopping.wait(self._interval):
            try:
                self._sweep()
            # A database that does not answer for a round must not end the schedule: the sweep
            # is idempotent and the next round expires whatever is still due.
            except Exception:  # noqa: BLE001 - any failure of one round, logged with its trace
                _log.exception("the scheduled expiry sweep failed; retrying next round")
