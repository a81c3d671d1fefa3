"""The ledger's clock on PostgreSQL: the database server's, so every replica measures leases and
stamps ``recorded_at`` on one clock (ADR 0057).

A sample reads the database's ``clock_timestamp()`` between two readings of the process's
monotonic clock: the database's reading is the anchor, placed at the round trip's midpoint, and
half the round trip is its error bound. Between samples the time is the anchor advanced by the
monotonic clock, so neither a skewed wall clock nor an NTP step of the replica's host enters a
lease or a ``recorded_at`` (CLOCK_MONOTONIC is never stepped; libfaketime shifts it by one
constant, which cancels in every difference). A daemon thread samples again every
``RESAMPLE_SECONDS``: one statement per replica per interval, none in any transaction. A failed
sample keeps the anchor there is; before the first one, ``now`` is UNAVAILABLE, as every
transaction is while the database does not answer. Within a process the time never goes back
(a new anchor may sit up to the error bounds behind the old one's extrapolation).

On SQLite the database's clock is the host's (one process, one file): the ledger keeps
``utc_now`` there (``started_clock`` returns None).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from prometheus_client.core import Metric
from sqlalchemy import Engine

from services.ledger.database import single_statement_read
from services.ledger.repository import clock as clock_rows
from shared.runtime.errors import Unavailable
from shared.runtime.metrics import export_at_scrape, gauge_family
from shared.runtime.periodic import Periodic

#: Seconds between two samples of the database's clock (after a failed one: RETRY_SECONDS).
RESAMPLE_SECONDS = 30.0
RETRY_SECONDS = 1.0

_log = logging.getLogger("forge.ledger.clock")


@dataclass(frozen=True)
class Sample:
    """One reading of the database's clock, bracketed by the process's monotonic clock."""

    #: The database's clock_timestamp(), taken as the time at ``monotonic``.
    database_time: datetime
    #: The monotonic clock at the round trip's midpoint.
    monotonic: float
    round_trip: float
    #: The host's wall clock minus the database's, at the midpoint (what a skew would add).
    host_offset: float

    @property
    def error_bound(self) -> float:
        """The database read its clock inside the round trip: at most half of it from the
        midpoint (plus the monotonic clock's drift since, parts per million)."""
        return self.round_trip / 2

    def at(self, monotonic: float) -> datetime:
        return self.database_time + timedelta(seconds=monotonic - self.monotonic)


def take_sample(engine: Engine, monotonic: Callable[[], float] = time.monotonic) -> Sample:
    """Read the database's clock once (one statement on a pooled connection)."""
    with single_statement_read(engine) as connection:
        wall_before, before = time.time(), monotonic()
        reading = clock_rows.database_time(connection)
        after, wall_after = monotonic(), time.time()
    return Sample(
        database_time=reading.astimezone(UTC),
        monotonic=(before + after) / 2,
        round_trip=after - before,
        host_offset=(wall_before + wall_after) / 2 - reading.timestamp(),
    )


class DatabaseClock:
    """``clock()``: the database's time now, from the last sample and the monotonic clock."""

    def __init__(
        self,
        engine: Engine,
        *,
        resample_seconds: float = RESAMPLE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self._resample_seconds = resample_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._sample: Sample | None = None
        self._last: datetime | None = None
        # A database that does not answer must not end the sampling: the anchor in use stays
        # right, up to the monotonic clock's drift, until a sample succeeds again.
        self._schedule = Periodic(
            "database-clock",
            self.resample,
            lambda: RETRY_SECONDS if self._sample is None else self._resample_seconds,
            failure="sampling the database's clock failed; keeping the last anchor",
            log=_log,
        )

    def __call__(self) -> datetime:
        sample = self._sample
        if sample is None:
            raise Unavailable(
                "DATABASE_UNAVAILABLE",
                "the ledger has not read its database's clock yet: the database does not answer",
            )
        now = sample.at(self._monotonic())
        with self._lock:
            if self._last is not None and now < self._last:
                return self._last
            self._last = now
        return now

    @property
    def sample(self) -> Sample | None:
        """The anchor in use (None before the first sample succeeded)."""
        return self._sample

    def unread(self) -> str | None:
        """The readiness check: what is missing until the first sample succeeded."""
        return None if self._sample is not None else "a reading of the database's clock"

    def resample(self) -> Sample:
        """Take a new anchor now (raises what the database raises; the old anchor stays)."""
        sample = take_sample(self._engine, self._monotonic)
        self._sample = sample
        return sample

    def start(self) -> DatabaseClock:
        """Take the first sample (logged with its error bound and the host's offset; a failure
        is retried by the thread), then sample every ``resample_seconds`` until :meth:`stop`."""
        try:
            sample = self.resample()
        # A database that does not answer yet: the thread retries, the ledger is NOT_SERVING.
        except Exception:  # noqa: BLE001 - any failure of the first sample
            _log.warning(
                "the database's clock cannot be read yet; retrying every %ss", RETRY_SECONDS
            )
        else:
            _log.info(
                "leases and recorded_at on the database's clock: error bound %.3f ms, "
                "this host's clock is %+.3f s off it",
                sample.error_bound * 1000,
                sample.host_offset,
            )
        export_at_scrape("ledger_clock", self._families)
        self._schedule.start()
        return self

    def stop(self) -> None:
        self._schedule.stop()

    def _families(self) -> Iterator[Metric]:
        sample = self._sample
        if sample is None:
            return
        yield gauge_family(
            "forge_ledger_clock_error_bound_seconds",
            "Half the round trip of the last sample of the database's clock, the bound of the "
            "ledger's clock error (ADR 0057)",
            sample.error_bound,
        )
        yield gauge_family(
            "forge_ledger_clock_sample_age_seconds",
            "Seconds since the last successful sample of the database's clock",
            self._monotonic() - sample.monotonic,
        )
        yield gauge_family(
            "forge_ledger_host_clock_offset_seconds",
            "This host's wall clock minus the database's at the last sample (not used by the "
            "ledger: a skew an operator should know of)",
            sample.host_offset,
        )


def started_clock(engine: Engine) -> DatabaseClock | None:
    """The database's clock, sampling, for a ledger on PostgreSQL; None on SQLite (the ledger
    keeps the host's clock, which is the database's there)."""
    if engine.dialect.name != "postgresql":
        return None
    return DatabaseClock(engine).start()
