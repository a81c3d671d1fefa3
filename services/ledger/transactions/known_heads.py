"""The head each run had after this process's last append to it: a hint that lets a native
append at that head note and insert in one statement (base.insert_after_known_head) instead
of reading the head first. Only a hint: the statement inserts only where the entry it
links to is stored and nothing follows it, so a stale or wrong hint costs a rollback and the
two-statement append, never a wrong link."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Final

from services.ledger.domain.journal import StoredEntry

#: Runs remembered (least recently appended out): about 150 bytes each.
DEFAULT_KNOWN_RUNS: Final = 10_000


class KnownHeads:
    """(sequence, hash) of the newest entry this process appended to each run, bounded."""

    def __init__(self, max_runs: int = DEFAULT_KNOWN_RUNS) -> None:
        self._max_runs = max_runs
        self._heads: OrderedDict[str, tuple[int, str]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, run_id: str) -> tuple[int, str] | None:
        with self._lock:
            return self._heads.get(run_id)

    def note(self, entry: StoredEntry) -> None:
        """``entry`` was committed as its run's newest entry."""
        with self._lock:
            self._heads[entry.run_id] = (entry.sequence, entry.hash)
            self._heads.move_to_end(entry.run_id)
            if len(self._heads) > self._max_runs:
                self._heads.popitem(last=False)

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._heads.pop(run_id, None)
