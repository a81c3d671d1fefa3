"""A bounded, content-addressed cache of the results of pure computations.

Reconstruction and analysis are pure functions of their input bytes ("same inputs → same bytes,
in any process"), so a result may be reused for the same inputs: the key is the SHA-256 of every
input (checkpoint, raw response, and the version and consumption time where they apply). The
reconstruction service remembers what it computed (one admission asks for the same analysis and
reconstruction several times: the operator's candidate read, then the admission's); the
candidate service remembers reconstruction's answers, so the admission's candidate, which follows
the operator's read of the same run, crosses no hop to reconstruction (ADR 0028). Refusals are
not remembered: they are recomputed, as before.

Bounded by entry count and by the memory the entries hold, least recently used first out. Each
result is measured once, when it is kept (``shared.runtime.memory_size.held_bytes``: the objects it
holds, not the size of its inputs or of its serialized form; ADR 0048).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Final, Generic, TypeVar

from shared.runtime.memory_size import held_bytes

ResultT = TypeVar("ResultT")

DEFAULT_MAX_ENTRIES: Final = 256
DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024


def content_key(*parts: bytes | str | int) -> str:
    """One digest over every part, each length-prefixed so no two part lists collide."""
    digest = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else str(part).encode("utf-8")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


class ContentCache(Generic[ResultT]):
    """LRU of results by content key; thread-safe (gRPC handlers run on a thread pool)."""

    def __init__(
        self, *, max_entries: int = DEFAULT_MAX_ENTRIES, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._entries: OrderedDict[str, tuple[ResultT, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get_or_compute(
        self,
        key: str,
        compute: Callable[[], ResultT],
        *,
        remember: Callable[[ResultT], bool] | None = None,
    ) -> ResultT:
        """The cached result of ``key``, or ``compute()`` (remembered when it returns, and when
        ``remember`` of it is true: a result that carries a refusal is not). A result is counted
        by the memory it holds, measured; one above the byte bound is not kept."""
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return found[0]
            self.misses += 1
        result = compute()  # outside the lock: concurrent misses compute in parallel
        if remember is not None and not remember(result):
            return result
        size = held_bytes(result)
        if size <= self._max_bytes:
            with self._lock:
                if key not in self._entries:
                    self._entries[key] = (result, size)
                    self._bytes += size
                while len(self._entries) > self._max_entries or self._bytes > self._max_bytes:
                    _, (_, evicted) = self._entries.popitem(last=False)
                    self._bytes -= evicted
        return result

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def held_bytes(self) -> int:
        with self._lock:
            return self._bytes
