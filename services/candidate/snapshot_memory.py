"""The journals this candidate service last read, by run (ADR 0030).

An operator reads a held run's candidate, then admits it: the admission's candidate reads the
same run's snapshot again a moment later. Every entry up to a head is fixed by the hash chain,
and a blob by its digest, so while the run's head has not moved the second read needs only the
header (run, head, policy, execution requests), which may have changed: the candidate sends the
head it holds (``GetRunSnapshotRequest.known_head``), and the ledger leaves the journal out when
that is still the head.

Only a journal both the ledger's verification and this service's own recomputation found intact
is remembered, and, when it was read with the closure's blobs, only when every blob the closure
names came with it (a blob stored later would otherwise never be seen). It is kept as the bytes
the ledger sent, not as the entries built from them: a held run's journal is about 13.5 KB as
sent and was about 40 KB in memory as entries with their parsed payloads (the memory figure's
candidate grew by 8.6 MB over 200 admissions, docs/performance-history.md, round 4, ninth pass), so
the byte bound is the memory held. Bounded by runs and by those bytes, least recently used first
out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from services.candidate.domain.model import JournalHead, Snapshot
from shared.continuity.canonical import is_digest
from shared.continuity.journal_chain import Verification
from shared.continuity.journal_closure import closure_of

# A bench round admits 808 runs read just before (docs/performance-history.md, round 4, ninth pass);
# a held run's journal with its two closure blobs is about 13.5 KB as the ledger sends it.
DEFAULT_MAX_RUNS: Final = 2048
DEFAULT_MAX_BYTES: Final = 32 * 1024 * 1024
# What one remembered journal holds besides its bytes (the record, its head, the verification).
_OVERHEAD: Final = 512


@dataclass(frozen=True)
class RememberedJournal:
    """One run's journal up to ``head`` as a snapshot read it, found intact."""

    head: JournalHead
    #: The serialized ``GetRunSnapshotResponse`` it came in (its header is not read again).
    journal: bytes
    #: Whether it was read with the closure's blobs.
    with_blobs: bool
    #: This service's recomputation of the chain over its entries.
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

    def remember(self, run_id: str, snapshot: Snapshot, sent: bytes, *, with_blobs: bool) -> None:
        """Keep ``snapshot``'s journal, as ``sent`` (the serialized answer it was built from),
        for the next read of ``run_id`` when it can stand for one (intact, and with every
        closure blob when read with them); otherwise forget the run."""
        journal = _rememberable(snapshot, sent, with_blobs)
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


def _rememberable(snapshot: Snapshot, sent: bytes, with_blobs: bool) -> RememberedJournal | None:
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
    return RememberedJournal(
        head=snapshot.head,
        journal=sent,
        with_blobs=with_blobs,
        recomputed=recomputed,
        size=len(sent) + _OVERHEAD,
    )
