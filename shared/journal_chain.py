"""The journal hash chain: how an entry's hash is computed and how a chain is checked. One
definition, used by the ledger when it seals and verifies and by the candidate service when it
re-verifies, independently, exactly the entries it evaluates.

An entry's hash is SHA-256 over the RFC 8785 canonical JSON of
``{run_id, sequence, kind, payload, prev_hash, actor, recorded_at}``; the first entry links to
the genesis hash.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from shared.canonical import GENESIS_HASH, CanonicalJsonError, canonical_text, digest_of, parse_json


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


def verify_chain(entries: Iterable[ChainEntry]) -> Verification:
    """Recompute every hash and link in sequence order; report the first broken sequence."""
    expected_prev, expected_sequence, checked = GENESIS_HASH, 1, 0
    head_sequence, head_hash = 0, GENESIS_HASH
    for entry in entries:
        checked += 1
        problem, at = entry_problem(entry, expected_sequence, expected_prev)
        if problem:
            return Verification(False, checked, head_sequence, head_hash, at, problem)
        expected_prev, expected_sequence = entry.hash, entry.sequence + 1
        head_sequence, head_hash = entry.sequence, entry.hash
    return Verification(True, checked, head_sequence, head_hash)
