"""One daemon thread that repeats an action on a schedule until stopped: the shape the ledger's
expiry sweep, its database clock and every service's readiness probe share.

A failed round is logged with its trace and the schedule goes on: each of these actions is
idempotent, and the next round does whatever the failed one left undone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable


class Periodic:
    """Calls ``action`` every ``interval()`` seconds (asked anew before each wait, so the
    schedule may depend on state) from :meth:`start` until :meth:`stop`; with ``first_now``
    the first call comes before the first wait."""

    def __init__(
        self,
        name: str,
        action: Callable[[], object],
        interval: Callable[[], float],
        *,
        failure: str,
        log: logging.Logger,
        first_now: bool = False,
    ) -> None:
        self._action = action
        self._interval = interval
        self._failure = failure
        self._log = log
        self._first_now = first_now
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop the schedule; wait for a round in progress (at most ``timeout`` seconds)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        if self._first_now:
            self._round()
        while not self._stopping.wait(self._interval()):
            self._round()

    def _round(self) -> None:
        try:
            self._action()
        except Exception:  # noqa: BLE001 - any failure of one round, logged with its trace
            self._log.exception(self._failure)
