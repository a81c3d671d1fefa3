"""The journals this candidate service last read, by run (ADR 0030).

An operator reads a held run's candidate, then admits it: the admission's candidate reads the
same run's snapshot again a moment later. Every entry up to a head is fixed by the hash chain,
and a blob by its digest, so while the run's head has not moved the second read needs only the
header (run, head, policy, execution requests), which may have changed: the candidate sends the
head it holds (``GetRunSnapshotRequest.known_head``), and the ledger leaves the journal out when
that is still the head.

Only a journal both the ledger's verification and this service's own recomputation found intact
is remembered, and, when it was read with the closure's blobs, only when every blob the closure
names came with it (a blob stored later would otherwise never be seen). Bounded by runs and by
the bytes held, least recently used first out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from services.candidate.domain.model import ChainVerification, Entry, JournalHead, Snapshot
from shared.continuity.canonical import is_digest
from shared.continuity.journal_chain import Verification
from shared.continuity.journal_closure import closure_of

# A bench round admits 808 runs read just before (docs/performance.md, round 4, ninth pass); a
# held run's journal with its two closure blobs holds about 15 KB.
DEFAULT_MAX_RUNS: Final = 2048
DEFAULT_MAX_BYTES: Final = 32 * 1024 * 1024
# What an entry holds besides its payload text (its other fields and the objects around them).
_ENTRY_OVERHEAD: Final = 600


@dataclass(frozen=True)
class RememberedJournal:
    """One run's journal up to ``head`` as a snapshot read it, found intact."""

    head: JournalHead
    entries: tuple[Entry, ...]
    #: The closure's blobs by digest (empty when read without them); read-only.
    blobs: Mapping[str, bytes]
    with_blobs: bool
    verification: ChainVerification
    recomputed: Verification
    size: int

    def serves(self, closure_blobs: bool) -> bool:
        return self.with_blobs or not closure_blobs


class SnapshotMemory:
    """LRU of remembered journals by run; thread-safe (handlers run on a thread pool). ``hits``
    counts reads answered from it (the ledger sent the header only), ``misses`` whole reads."""

    def __init__(
        self, *, max_runs: int = DEFAULT_MAX_RUNS, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self._max_runs = max_runs
        self._max_bytes = max_bytes
        self._journals: OrderedDict[str, RememberedJournal] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def known(self, run_id: str, closure_blobs: bool) -> RememberedJournal | None:
        """The journal remembered for ``run_id`` that can stand for a read with or without the
        closure's blobs (None: none)."""
        with self._lock:
            found = self._journals.get(run_id)
            if found is None or not found.serves(closure_blobs):
                return None
            self._journals.move_to_end(run_id)
            return found

    def counted(self, *, hit: bool) -> None:
        with self._lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1

    def remember(self, run_id: str, snapshot: Snapshot, *, with_blobs: bool) -> None:
        """Keep ``snapshot``'s journal for the next read of ``run_id`` when it can stand for one
        (intact, and with every closure blob when read with them); otherwise forget the run."""
        journal = _rememberable(snapshot, with_blobs)
        with self._lock:
            dropped = self._journals.pop(run_id, None)
            if dropped is not None:
                self._bytes -= dropped.size
            if journal is None or journal.size > self._max_bytes:
                return
            self._journals[run_id] = journal
            self._bytes += journal.size
            while len(self._journals) > self._max_runs or self._bytes > self._max_bytes:
                _, evicted = self._journals.popitem(last=False)
                self._bytes -= evicted.size

    def __len__(self) -> int:
        with self._lock:
            return len(self._journals)

    @property
    def held_bytes(self) -> int:
        with self._lock:
            return self._bytes


def _rememberable(snapshot: Snapshot, with_blobs: bool) -> RememberedJournal | None:
    verification, recomputed = snapshot.verification, snapshot.recomputed
    if not verification.valid or verification.head != snapshot.head:
        return None
    if recomputed is None or not recomputed.valid:
        return None
    if (recomputed.head_sequence, recomputed.head_hash) != (
        snapshot.head.sequence,
        snapshot.head.hash,
    ):
        return None
    if with_blobs:
        named = [d for d in closure_of(snapshot.entries).blob_digests if is_digest(d)]
        if any(digest not in snapshot.blobs for digest in named):
            return None
    size = sum(len(e.payload_json) + _ENTRY_OVERHEAD for e in snapshot.entries)
    size += sum(len(content) + len(digest) for digest, content in snapshot.blobs.items())
    return RememberedJournal(
        head=snapshot.head,
        entries=snapshot.entries,
        blobs=MappingProxyType(dict(snapshot.blobs)),  # shared by every read it answers
        with_blobs=with_blobs,
        verification=verification,
        recomputed=recomputed,
        size=size,
    )
