"""A worker's completion and its two verdicts, kept apart (spec 001: "certifiable" is not
"done"): the worker's claim that the task goal holds, recorded as its word, and the ledger's
certification that the journal supports safe completion, computed from the journal alone."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from services.ledger.domain.journal import EntryKind, StoredEntry, payload_of
from services.ledger.domain.lease_records import LEASE_KINDS, LeaseFence, Standing
from shared.continuity.canonical import is_digest
from shared.runtime.errors import field_invalid


class GoalClaim(enum.Enum):
    """The worker's claim (stored names)."""

    UNSTATED = "unstated"
    SATISFIED = "satisfied"
    NOT_SATISFIED = "not_satisfied"
    UNKNOWN = "unknown"


#: Outcomes that close an intent. An ``unknown`` outcome leaves the effect open.
CLOSING = frozenset({"succeeded", "failed"})
#: Entries that mark a request as under reconciliation (owner loss suspected or decided).
RECONCILIATION_MARKERS: frozenset[EntryKind] = frozenset(
    {EntryKind.RECONCILIATION_VERIFICATION, EntryKind.RECONCILIATION_SETTLEMENT}
)
RECONCILIATION_KINDS = frozenset(kind.value for kind in RECONCILIATION_MARKERS)
#: The kinds :func:`certify` can be moved by: the lease's openings and ends its fence follows,
#: the markers, and the intents and outcomes it weighs. An entry of any other kind (a worker's
#: model turn or grant, fenced or not, opens and closes nothing) leaves the answer as it was, so
#: a completion certifies from these kinds alone, read with the entries it judges.
CERTIFYING_KINDS: frozenset[EntryKind] = (
    LEASE_KINDS | RECONCILIATION_MARKERS | {EntryKind.TOOL_INTENT, EntryKind.TOOL_OUTCOME}
)


@dataclass(frozen=True)
class Certification:
    """Whether the journal certifies safe completion of one claim."""

    generation_current: bool
    open_intent_call_ids: tuple[str, ...]
    reconciliation_marker_sequences: tuple[int, ...]

    @property
    def certified(self) -> bool:
        return (
            self.generation_current
            and not self.open_intent_call_ids
            and not self.reconciliation_marker_sequences
        )

    def as_payload(self) -> dict[str, object]:
        return {
            "certified": self.certified,
            "generation_current": self.generation_current,
            "open_intent_call_ids": list(self.open_intent_call_ids),
            "reconciliation_marker_sequences": list(self.reconciliation_marker_sequences),
        }


@dataclass(frozen=True)
class Completion:
    """What a completion recorded: the request after it and both verdicts."""

    goal_claim: GoalClaim
    certification: Certification
    completed_rounds: int
    journal_sequence: int


def check_final_output_digest(value: str) -> None:
    if value and not is_digest(value):
        raise field_invalid(
            "final_output_digest",
            "must be sha256:<64 hex>",
            "final_output_digest must be sha256:<64 hex> or empty",
        )


def certify(
    entries: Iterable[StoredEntry],
    execution_request_id: str,
    generation: int,
    current: int,
    parse: Callable[[StoredEntry], Any] = payload_of,
) -> Certification:
    """The certification of ``execution_request_id``'s claim at ``generation`` from the run's
    journal (entries in sequence order): the generation is the current one, every effect intent
    the claim's worker journaled under its lease has a succeeded or failed outcome it journaled
    under the same lease, and no reconciliation entry names the request. Any other record, a
    foreign one naming the request or a native one naming none, closes and opens nothing; only
    entries of :data:`CERTIFYING_KINDS` count, the others may be left out. ``parse``: an
    entry's payload (the caller's, when it parsed some of them already)."""
    claim_sequence = 0
    intents: dict[str, int] = {}
    latest: dict[str, tuple[str, int]] = {}  # call id -> (latest outcome status, sequence)
    markers: list[int] = []
    fence = LeaseFence(execution_request_id)
    for entry in entries:
        payload = parse(entry)
        if not isinstance(payload, dict):
            continue
        names_request = payload.get("execution_request_id") == execution_request_id
        fenced = fence.see(entry, payload) is Standing.FENCED
        if entry.kind in RECONCILIATION_KINDS and names_request:
            markers.append(entry.sequence)
        elif (
            entry.kind == EntryKind.WORKER_CLAIMED.value
            and names_request
            and payload.get("lease_generation") == generation
        ):
            claim_sequence, intents, latest = entry.sequence, {}, {}
        elif not claim_sequence or not fenced or not isinstance(payload.get("call_id"), str):
            continue
        elif entry.kind == EntryKind.TOOL_INTENT.value:
            intents.setdefault(str(payload["call_id"]), entry.sequence)
        elif entry.kind == EntryKind.TOOL_OUTCOME.value:
            latest[str(payload["call_id"])] = (str(payload.get("status")), entry.sequence)
    # Open: an intent without a closing outcome, or any call whose latest outcome is unknown.
    open_calls = {c: s for c, s in intents.items() if latest.get(c, ("", 0))[0] not in CLOSING}
    open_calls.update({c: s for c, (status, s) in latest.items() if status == "unknown"})
    return Certification(
        generation_current=generation == current,
        open_intent_call_ids=tuple(sorted(open_calls, key=lambda c: open_calls[c])),
        reconciliation_marker_sequences=tuple(markers),
    )
