"""How the worker stops: when it is asked to, and before its lease runs out (ADR 0039).

SIGTERM or SIGINT sets a :class:`Shutdown`. From then on the worker starts no new effect: the
records written before an effect (``model_request_sent``, ``tool_intent``, ``RecordCommand``)
are not written, so nothing new is sent or run. The effect already under way — a command or a
model request — gets the stop's grace (``FORGE_WORKER_STOP_GRACE_SECONDS``) to finish and have
its outcome recorded; past the grace it is abandoned (the command killed, the request dropped)
with no outcome, so its intent stays open for reconciliation, which is the rule for any effect
whose end the worker cannot vouch for. A second signal abandons at once. The worker then reports
the failure (``worker_stopped_by_sigterm`` / ``_sigint``), which says why it stopped, and exits
with ``EXIT_INTERRUPTED`` (:mod:`services.worker.run`).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from types import FrameType
from typing import Final

#: The signals that stop the worker.
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
DEFAULT_STOP_GRACE_SECONDS: Final = 10.0


class WorkerInterrupted(Exception):
    """The worker was asked to stop before (or while) an effect: nothing more starts."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(f"stopped by {signal_name}")
        self.signal_name = signal_name


class Shutdown:
    """A stop request (thread-safe: effects run on worker threads, signals arrive on the main
    one)."""

    def __init__(self, grace_seconds: float = DEFAULT_STOP_GRACE_SECONDS) -> None:
        self.grace_seconds = grace_seconds
        self.signal_name = ""
        self._requested = threading.Event()
        self._abandon_at = float("inf")

    def install(self) -> None:
        """Handle :data:`STOP_SIGNALS` in this (the main) thread."""
        for number in STOP_SIGNALS:
            signal.signal(number, self._on_signal)

    def _on_signal(self, number: int, _frame: FrameType | None) -> None:
        self.request(signal.Signals(number).name)

    def request(self, signal_name: str) -> None:
        """The first request starts the grace; a second one ends it."""
        now = time.monotonic()
        if self._requested.is_set():
            self._abandon_at = now
            return
        self.signal_name = signal_name
        self._abandon_at = now + self.grace_seconds
        self._requested.set()

    @property
    def requested(self) -> bool:
        return self._requested.is_set()

    def check(self) -> None:
        """Before an effect starts: refuse it once a stop was requested."""
        if self.requested:
            raise WorkerInterrupted(self.signal_name)

    def abandon_now(self) -> bool:
        """Whether the effect under way is to be abandoned (its grace is over)."""
        return self.requested and time.monotonic() >= self._abandon_at

    def wait(self, seconds: float) -> None:
        """Sleep up to ``seconds``, waking early when a stop is requested."""
        self._requested.wait(seconds)


#: Seconds kept free at the end of the lease for the records after an effect (its outcome, the
#: failure report): an effect's timeout ends this long before the lease does.
LEASE_MARGIN_SECONDS: Final = 2.0
#: An effect with less time than this left before the margin is not started.
MINIMUM_EFFECT_SECONDS: Final = 1.0


class LeaseExhausted(Exception):
    """Too little of the lease is left for another effect: nothing more starts."""

    def __init__(self, remaining: float) -> None:
        super().__init__(f"{remaining:.1f} s of the lease left, too little for another effect")
        self.remaining = remaining


class LeaseBound:
    """The lease every effect must end within (spec: the lease bounds execution), as a deadline
    on this process's monotonic clock: never stepped, and whatever this host's wall clock says
    (ADR 0057). Built by :func:`measured_lease`; a fenced write past the lease is refused anyway."""

    def __init__(
        self, ends_at: float | None, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        #: The lease's end on ``monotonic``; None: no lease bounds this run.
        self.ends_at = ends_at
        self._monotonic = monotonic

    def remaining(self) -> float:
        if self.ends_at is None:
            return float("inf")
        return self.ends_at - self._monotonic()

    def effect_timeout(self, wanted: float) -> float:
        """``wanted`` cut to what is left of the lease before its margin; raises
        :class:`LeaseExhausted` when that is too little to start."""
        left = self.remaining() - LEASE_MARGIN_SECONDS
        if left < MINIMUM_EFFECT_SECONDS:
            raise LeaseExhausted(left + LEASE_MARGIN_SECONDS)
        return min(wanted, left)


def measured_lease(
    expires_at: datetime | None,
    ledger_time: datetime | None,
    sent_at: float,
    *,
    wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    monotonic: Callable[[], float] = time.monotonic,
) -> LeaseBound:
    """The lease of a claim answer, on this process's monotonic clock.

    ``ledger_time`` is the ledger's time when it read the lease for the answer, which it did
    after this process sent the request (at ``sent_at`` on ``monotonic``): the lease ends at
    least ``expires_at - ledger_time`` after ``sent_at``. Counting that much from the send
    errs early by the request's way to the ledger, never late, and no wall clock enters it.

    A ledger of an earlier release answers no ``ledger_time``: what is left is then read on this
    host's wall clock once, now (the rule before ADR 0057's worker bound; a host behind the
    ledger's clock over-counts by its skew)."""
    if expires_at is None:
        return LeaseBound(None, monotonic)
    if ledger_time is None:
        return LeaseBound(monotonic() + (expires_at - wall_clock()).total_seconds(), monotonic)
    return LeaseBound(sent_at + (expires_at - ledger_time).total_seconds(), monotonic)


class EffectBounds:
    """What every effect is started under: the stop request and the lease."""

    def __init__(self, shutdown: Shutdown, lease: LeaseBound) -> None:
        self.shutdown = shutdown
        self.lease = lease

    def start(self, wanted_timeout: float) -> float:
        """Before an effect starts: its timeout, or an exception that says why it may not."""
        self.shutdown.check()
        return self.lease.effect_timeout(wanted_timeout)


#: Bounds nothing: no stop request and no lease (an effect run outside a claim).
def unbounded() -> EffectBounds:
    return EffectBounds(Shutdown(), LeaseBound(None))
