"""Reading the native journal: an independent recomputation of the chain over exactly the entries
the candidate evaluates, and the request / checkpoint / response / consume closure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from shared.journal_chain import IntactEntries, verify_chain

from .model import Entry, JournalHead

RUN_STARTED: Final = "run_started"
CHECKPOINT_STORED: Final = "checkpoint_stored"
MODEL_REQUEST_SENT: Final = "model_request_sent"
RESPONSE_CONSUMED: Final = "response_consumed"
TOOL_CALL_GRANTED: Final = "tool_call_granted"
TOOL_INTENT: Final = "tool_intent"
TOOL_OUTCOME: Final = "tool_outcome"
COMMAND_EXECUTED: Final = "command_executed"
RUN_HELD: Final = "run_held"

# The native custody rows: tool grants, intents, outcomes and charged commands.
CUSTODY_KINDS: Final = frozenset({TOOL_CALL_GRANTED, TOOL_INTENT, TOOL_OUTCOME, COMMAND_EXECUTED})


# Entries this process already recomputed and found intact, by their exact fields: the next
# candidate of the same run recomputes only what is new or altered (shared.journal_chain).
_INTACT = IntactEntries()


@dataclass(frozen=True)
class ChainBreak:
    sequence: int
    problem: str


def check_chain(entries: Sequence[Entry], head: JournalHead) -> ChainBreak | None:
    """Recompute every link and hash of the entries read (shared.journal_chain) and check they
    end at the head the ledger reported; the first break, if any."""
    verified = verify_chain(entries, _INTACT)
    if not verified.valid:
        return ChainBreak(verified.first_broken_sequence, verified.problem)
    if verified.head_sequence != head.sequence or verified.head_hash != head.hash:
        return ChainBreak(verified.head_sequence + 1, "head_mismatch")
    return None


@dataclass(frozen=True)
class Closure:
    """The last model request and what the journal says about it."""

    request: Entry | None
    consume: Entry | None
    checkpoint_stored: Entry | None

    @property
    def request_id(self) -> str:
        return self.request.text("request_id") if self.request else ""

    @property
    def checkpoint_digest(self) -> str:
        return self.request.text("checkpoint_digest") if self.request else ""

    @property
    def response_digest(self) -> str:
        return self.consume.text("response_digest") if self.consume else ""

    @property
    def consumed_at(self) -> str:
        return self.consume.text("consumed_at") if self.consume else ""


def closure_of(entries: Sequence[Entry]) -> Closure:
    """The last ``model_request_sent``, the first ``response_consumed`` after it with the same
    request_id, and the last ``checkpoint_stored`` of its checkpoint that precedes it."""
    requests = [e for e in entries if e.kind == MODEL_REQUEST_SENT]
    if not requests:
        return Closure(None, None, None)
    request = requests[-1]
    request_id = request.text("request_id")
    consume = next(
        (
            e
            for e in entries
            if e.sequence > request.sequence
            and e.kind == RESPONSE_CONSUMED
            and e.text("request_id") == request_id
        ),
        None,
    )
    digest = request.text("checkpoint_digest")
    stored = [
        e
        for e in entries
        if e.sequence < request.sequence
        and e.kind == CHECKPOINT_STORED
        and digest
        and e.text("checkpoint_digest") == digest
    ]
    return Closure(request, consume, stored[-1] if stored else None)


def custody_rows(entries: Sequence[Entry]) -> list[dict[str, object]]:
    """The custody rows the custody digest binds: (sequence, kind, hash) in journal order."""
    return [
        {"sequence": e.sequence, "kind": e.kind, "hash": e.hash}
        for e in entries
        if e.kind in CUSTODY_KINDS
    ]
