"""The ledger's scheduled expiry sweep (ADR 0039): a daemon thread that, every
FORGE_EXPIRY_SWEEP_SECONDS, expires the queued requests whose lease ran out, so an expired
request frees its place in the caps and its never-claimed recovery on time, not at the next
admission. Replicas sharing one PostgreSQL take turns through an advisory lock
(``Ledger.sweep_expired``); a failed round is logged and the next one tries again."""

from __future__ import annotations

import logging
from collections.abc import Callable

from shared.runtime.periodic import Periodic

_log = logging.getLogger("forge.ledger.expiry")


class ExpirySweeper:
    """Calls ``sweep`` every ``interval`` seconds from :meth:`start` until :meth:`stop`. A failed
    round is logged and the next one tries again: the sweep is idempotent and expires whatever
    is still due."""

    def __init__(self, sweep: Callable[[], object], interval: float) -> None:
        self._schedule = Periodic(
            "expiry-sweep",
            sweep,
            lambda: interval,
            failure="the scheduled expiry sweep failed; retrying next round",
            log=_log,
        )

    def start(self) -> ExpirySweeper:
        self._schedule.start()
        return self

    def stop(self) -> None:
        self._schedule.stop()
