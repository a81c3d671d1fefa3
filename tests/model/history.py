"""The history every model run records, Elle-style (docs/reliability.md, "The history checker").

One JSON line per event: an ``invoke`` when a client sends an operation, then exactly one of
``ok`` (acknowledged, with the values the answer carried), ``fail`` (refused: the code and
reason; the spec says nothing was written) or ``info`` (the answer was lost: the write may or may
not have happened). ``time`` is a monotonic nanosecond clock shared by every client of the run,
so the checker can order an acknowledgement before a later invocation in real time.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

HISTORY_FORMAT = "forge.continuity.model-history/1"


@dataclass
class History:
    """Appends events to one JSON-lines file; safe to share between client threads."""

    path: Path
    _out: IO[str] = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _ids: itertools.count[int] = field(default_factory=itertools.count, init=False)

    def __post_init__(self) -> None:
        self._out = self.path.open("w", encoding="utf-8")
        self._write({"format": HISTORY_FORMAT})

    def _write(self, event: dict[str, Any]) -> None:
        with self._lock:
            self._out.write(json.dumps(event, sort_keys=True) + "\n")
            self._out.flush()

    def invoke(self, process: str, operation: str, value: dict[str, Any]) -> int:
        """Record an operation sent; returns its id for :meth:`complete`."""
        index = next(self._ids)
        self._write(
            {
                "index": index,
                "type": "invoke",
                "process": process,
                "f": operation,
                "value": value,
                "time": time.monotonic_ns(),
            }
        )
        return index

    def complete(self, index: int, outcome: str, value: dict[str, Any]) -> None:
        """Record how operation ``index`` ended: ``ok``, ``fail`` or ``info``."""
        if outcome not in ("ok", "fail", "info"):
            raise ValueError(f"unknown outcome {outcome!r}")
        self._write({"index": index, "type": outcome, "value": value, "time": time.monotonic_ns()})

    def close(self) -> None:
        self._out.close()
