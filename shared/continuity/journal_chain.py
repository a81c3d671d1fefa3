"""The journal hash chain: how an entry's hash is computed and how a chain is checked. One
definition, used by the ledger when it seals and verifies and by the candidate service when it
re-verifies, independently, exactly the entries it evaluates.

An entry's hash is SHA-256 over the RFC 8785 canonical JSON of
``{run_id, sequence, kind, payload, prev_hash, actor, recorded_at}``; the first entry links to
the genesis hash.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from shared.continuity.canonical import (
    GENESIS_HASH,
    CanonicalJsonError,
    canonical_text,
    digest_of,
    parse_json,
)


class ChainEntry(Protocol):
    """What the chain covers of a stored entry."""

    @property
    def run_id(self) -> str: ...
    @property
    def sequence(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def payload_json(self) -> str: ...
    @property
    def prev_hash(self) -> str: ...
    @property
    def hash(self) -> str: ...
    @property
    def actor(self) -> str: ...
    @property
    def recorded_at(self) -> str: ...


def entry_hash(
    *,
    run_id: str,
    sequence: int,
    kind: str,
    payload: Any,
    prev_hash: str,
    actor: str,
    recorded_at: str,
) -> str:
    """The hash of one entry's canonical envelope."""
    return digest_of(
        {
            "run_id": run_id,
            "sequence": sequence,
            "kind": kind,
            "payload": payload,
            "prev_hash": prev_hash,
            "actor": actor,
            "recorded_at": recorded_at,
        }
    )


def entry_problem(entry: ChainEntry, expected_sequence: int, expected_prev: str) -> tuple[str, int]:
    """("", 0) when the entry is intact, else (problem, the sequence where the chain breaks)."""
    if entry.sequence != expected_sequence:
        # A missing entry breaks the chain where it should have been.
        return "sequence_gap", expected_sequence
    if entry.prev_hash != expected_prev:
        return "link_mismatch", entry.sequence
    try:
        payload = parse_json(entry.payload_json)
        if canonical_text(payload) != entry.payload_json:
            return "payload_not_canonical", entry.sequence
    except CanonicalJsonError:
        return "payload_not_canonical", entry.sequence
    recomputed = entry_hash(
        run_id=entry.run_id,
        sequence=entry.sequence,
        kind=entry.kind,
        payload=payload,
        prev_hash=entry.prev_hash,
        actor=entry.actor,
        recorded_at=entry.recorded_at,
    )
    if recomputed != entry.hash:
        return "hash_mismatch", entry.sequence
    return "", 0


@dataclass(frozen=True)
class Verification:
    """Result of recomputing a chain from its first entry."""

    valid: bool
    entries_checked: int
    head_sequence: int
    head_hash: str
    first_broken_sequence: int = 0
    problem: str = ""


DEFAULT_INTACT_ENTRIES: Final = 200_000
#: How many entries :func:`verify_chain` takes from its iterable at a time.
VERIFY_BATCH: Final = 1000


def entry_fields(entry: ChainEntry) -> bytes:
    """A digest of every stored field of an entry (each length-prefixed, so no two field lists
    collide): what its hash recomputation is a pure function of. Raw SHA-256 over the stored text,
    far cheaper than the canonical-JSON recomputation, and 32 bytes to remember."""
    # One f-string, not a join over a generator: this runs for every entry of every read (a
    # third of a snapshot's CPU with the generator). Each field is written "<length>:<text>".
    run_id, kind, payload = entry.run_id, entry.kind, entry.payload_json
    prev, own, actor, at = entry.prev_hash, entry.hash, entry.actor, entry.recorded_at
    sequence = str(entry.sequence)
    text = (
        f"{len(run_id)}:{run_id}{len(sequence)}:{sequence}{len(kind)}:{kind}"
        f"{len(payload)}:{payload}{len(prev)}:{prev}{len(own)}:{own}"
        f"{len(actor)}:{actor}{len(at)}:{at}"
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class IntactEntries:
    """A bounded memory (least recently used out) of entries, by the digest of their exact stored
    fields (:func:`entry_fields`), whose canonical payload and hash were recomputed and matched.
    The recomputation is a pure function of those fields, so an entry read again with identical
    fields needs no second recomputation; any altered field is a different key and is recomputed.
    Links and sequence order are always checked."""

    def __init__(self, max_entries: int = DEFAULT_INTACT_ENTRIES) -> None:
        self._max_entries = max_entries
        self._entries: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()

    def known(self, keys: Iterable[bytes]) -> list[bool]:
        """For each key, whether it is remembered (those that are count as just used): one
        visit under the lock for a whole batch of a snapshot."""
        with self._lock:
            entries = self._entries
            found = []
            for key in keys:
                if key in entries:
                    entries.move_to_end(key)
                    found.append(True)
                else:
                    found.append(False)
            return found

    def add_all(self, keys: Iterable[bytes]) -> None:
        with self._lock:
            entries = self._entries
            for key in keys:
                entries[key] = None
            for _ in range(len(entries) - self._max_entries):
                entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


class ChainVerifier:
    """:func:`verify_chain` batch by batch, for a reader that sends or keeps the entries as it
    goes (one pass over the rows): ``add_all`` each batch in order, then ``result``. After the
    first break nothing more is checked (the result names that break)."""

    def __init__(self, intact: IntactEntries | None = None) -> None:
        self._intact = intact
        self._expected_prev, self._expected_sequence, self._checked = GENESIS_HASH, 1, 0
        self._head_sequence, self._head_hash = 0, GENESIS_HASH
        self._broken: Verification | None = None

    def add_all(self, entries: Sequence[ChainEntry]) -> bool:
        """Check the next entries, in order; False once the chain is broken (here or before).
        The memory of intact entries is visited twice per batch (what it knows, what it learns),
        not twice per entry: a snapshot sends its journal in batches."""
        if self._broken is not None:
            return False
        intact = self._intact
        if intact is None:
            return self._check(entries, (), itertools.repeat(False), None)
        keys = [entry_fields(entry) for entry in entries]
        recomputed: list[bytes] = []
        try:
            return self._check(entries, keys, intact.known(keys), recomputed)
        finally:
            intact.add_all(recomputed)

    def _check(
        self,
        entries: Sequence[ChainEntry],
        keys: Sequence[bytes],
        known: Iterable[bool],
        recomputed: list[bytes] | None,
    ) -> bool:
        """Each entry is intact when remembered (its exact fields, ``known``) and linked where
        expected; otherwise recomputed, and its key added to ``recomputed`` when intact."""
        # known: one answer per entry, or an endless False without a memory
        for index, (entry, remembered) in enumerate(zip(entries, known, strict=False)):
            self._checked += 1
            sequence, prev = self._expected_sequence, self._expected_prev
            if remembered and entry.sequence == sequence and entry.prev_hash == prev:
                problem, at = "", 0
            else:
                problem, at = entry_problem(entry, sequence, prev)
                if problem:
                    self._broken = Verification(
                        False, self._checked, self._head_sequence, self._head_hash, at, problem
                    )
                    return False
                if recomputed is not None:
                    recomputed.append(keys[index])
            self._expected_prev, self._expected_sequence = entry.hash, entry.sequence + 1
            self._head_sequence, self._head_hash = entry.sequence, entry.hash
        return True

    def result(self) -> Verification:
        if self._broken is not None:
            return self._broken
        return Verification(True, self._checked, self._head_sequence, self._head_hash)


def verify_chain(
    entries: Iterable[ChainEntry], intact: IntactEntries | None = None
) -> Verification:
    """Recompute every hash and link in sequence order; report the first broken sequence. With
    ``intact``, an entry whose exact fields were recomputed before is not recomputed again (same
    fields, same answer); the ones recomputed now and found intact are remembered there."""
    verifier = ChainVerifier(intact)
    # In batches, so an iterator over a cursor stays one batch in memory.
    remaining = iter(entries)
    while batch := list(itertools.islice(remaining, VERIFY_BATCH)):
        if not verifier.add_all(batch):
            break
    return verifier.result()
