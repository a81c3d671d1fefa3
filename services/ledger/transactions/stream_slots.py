"""Slots for the ledger's long calls: at most ``limit`` held at once, and at most ``per_caller``
by one caller (a principal's identity), so neither all callers together nor one caller alone can
hold the server threads that admissions, claims and commands need (issue 45 §2).

A slot is taken before the call reads anything and given back when the call ends, however it
ends; a call beyond either bound is refused at once, RESOURCE_EXHAUSTED with a RetryInfo delay
(the bound frees as other calls end), having read and written nothing.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from shared.runtime.errors import exhausted_for_now

#: The delay a refusal of these bounds asks for: a stream or follower ends in about that time
#: (a follower of a caller that went away stops within a poll tick).
RETRY_AFTER_MS = 1000


@dataclass(frozen=True)
class Refusals:
    """The reasons a bound's refusals carry, and what the slots are (for the message)."""

    what: str
    exhausted: str
    per_caller_exhausted: str


class CallerSlots:
    """Counted slots, in all and per caller; thread-safe."""

    def __init__(self, limit: int, per_caller: int, refusals: Refusals) -> None:
        if limit < 1 or per_caller < 1:
            raise ValueError(f"the {refusals.what} limits must be at least 1")
        self.limit = limit
        self.per_caller = min(per_caller, limit)
        self._refusals = refusals
        self._lock = threading.Lock()
        self._held: Counter[str] = Counter()
        self._in_use = 0

    @property
    def in_use(self) -> int:
        """Slots held now (the metrics gauge beside the limit)."""
        with self._lock:
            return self._in_use

    @contextmanager
    def hold(self, caller: str) -> Iterator[None]:
        """One slot for ``caller`` while the block runs; refused at once beyond a bound."""
        with self._lock:
            if self._in_use >= self.limit:
                raise exhausted_for_now(
                    self._refusals.exhausted,
                    f"{self.limit} {self._refusals.what} are already open; retry later",
                    limit=self.limit,
                    retry_after_ms=RETRY_AFTER_MS,
                )
            if self._held[caller] >= self.per_caller:
                raise exhausted_for_now(
                    self._refusals.per_caller_exhausted,
                    f"this caller already has {self.per_caller} {self._refusals.what} open (the "
                    "most one caller may hold); end one, or retry later",
                    limit=self.per_caller,
                    retry_after_ms=RETRY_AFTER_MS,
                )
            self._held[caller] += 1
            self._in_use += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_use -= 1
                self._held[caller] -= 1
                if not self._held[caller]:
                    del self._held[caller]
