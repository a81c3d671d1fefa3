"""Reading the native journal: an independent recomputation of the chain over exactly the entries
the candidate evaluates, and the custody rows (the request / checkpoint / response / consume
closure is ``shared.continuity.journal_closure``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from services.candidate.domain.model import Entry, JournalHead
from shared.continuity import journal_closure
from shared.continuity.journal_chain import ChainVerifier, IntactEntries, Verification, verify_chain

RUN_STARTED: Final = "run_started"
TOOL_CALL_GRANTED: Final = "tool_call_granted"
TOOL_INTENT: Final = "tool_intent"
TOOL_OUTCOME: Final = "tool_outcome"
COMMAND_EXECUTED: Final = "command_executed"
RUN_HELD: Final = "run_held"

# The native custody rows: tool grants, intents, outcomes and charged commands.
CUSTODY_KINDS: Final = frozenset({TOOL_CALL_GRANTED, TOOL_INTENT, TOOL_OUTCOME, COMMAND_EXECUTED})


# Entries this process already recomputed and found intact, by their exact fields: the next
# candidate of the same run recomputes only what is new or altered
# (shared.continuity.journal_chain).
_INTACT = IntactEntries()


#: The closure of the entries the candidate evaluates. ``shared.continuity.journal_closure``
#: defines it once:
#: the ledger names the blobs it sends with a snapshot from the same definition.
Closure: TypeAlias = journal_closure.Closure[Entry]


@dataclass(frozen=True)
class ChainBreak:
    sequence: int
    problem: str


def chain_verifier() -> ChainVerifier:
    """A recomputation to feed entry by entry as a snapshot arrives (the same memory of intact
    entries as :func:`check_chain`)."""
    return ChainVerifier(_INTACT)


def check_chain(
    entries: Sequence[Entry], head: JournalHead, recomputed: Verification | None = None
) -> ChainBreak | None:
    """Recompute every link and hash of the entries read (shared.continuity.journal_chain), or
    take ``recomputed``, this service's own recomputation over exactly these entries made as they
    arrived, and check they end at the head the ledger reported; the first break, if any."""
    verified = recomputed if recomputed is not None else verify_chain(entries, _INTACT)
    if not verified.valid:
        return ChainBreak(verified.first_broken_sequence, verified.problem)
    if verified.head_sequence != head.sequence or verified.head_hash != head.hash:
        return ChainBreak(verified.head_sequence + 1, "head_mismatch")
    return None


def custody_rows(entries: Sequence[Entry]) -> list[dict[str, object]]:
    """The custody rows the custody digest binds: (sequence, kind, hash) in journal order."""
    return [
        {"sequence": e.sequence, "kind": e.kind, "hash": e.hash}
        for e in entries
        if e.kind in CUSTODY_KINDS
    ]
