"""The worker's own records of a continuity execution request, and which of them were written
under its fenced lease (issue 43).

Since the fence, the ledger accepts a record naming a continuity request only from the worker
holding its current lease generation (``transactions/journal.py``). A record stored otherwise
(before the fence, or inserted past the ledger) is *foreign*: reconciliation and certification
never count it, and the reconciliation snapshot shows it as such. Pure rules over journal
entries in sequence order."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from services.ledger.domain.journal import EntryKind, StoredEntry

#: What the reference worker appends itself, each naming ``execution_request_id`` and
#: ``lease_generation``: its model turns and tool calls. Claims, commands, failures and
#: completions are written by ExecutionService.
WORKER_RECORD_KINDS = frozenset(
    {
        EntryKind.MODEL_REQUEST_SENT,
        EntryKind.RESPONSE_CONSUMED,
        EntryKind.TOOL_CALL_GRANTED,
        EntryKind.TOOL_INTENT,
        EntryKind.TOOL_OUTCOME,
    }
)
_RECORD_NAMES = frozenset(kind.value for kind in WORKER_RECORD_KINDS)
#: Ledger entries naming a request that end the lease it was under: a failure, every request
#: event (completion, cancellation, expiry, a requeue) and a reconciliation's settlement. A
#: worker write after one of them is refused, so a record there is foreign.
LEASE_ENDS: frozenset[EntryKind] = frozenset(
    {EntryKind.REQUEST_FAILED, EntryKind.REQUEST_EVENT, EntryKind.RECONCILIATION_SETTLEMENT}
)
_LEASE_END_NAMES = frozenset(kind.value for kind in LEASE_ENDS)
#: The kinds that move a :class:`LeaseFence` (open or close a lease); an entry of any other kind
#: leaves it as it was, whatever it names.
LEASE_KINDS: frozenset[EntryKind] = LEASE_ENDS | {EntryKind.WORKER_CLAIMED}


class Standing(enum.Enum):
    """How an entry stands to one execution request's lease."""

    #: Not a worker record naming the request (a claim, a ledger entry, another request's).
    OTHER = "other"
    #: Written by the holder of the open lease under the generation it names.
    FENCED = "fenced"
    #: Names the request but not written under its lease: never trusted.
    FOREIGN = "foreign"


def lease_generation(payload: Mapping[str, Any]) -> int:
    """The lease generation a payload names; -1 when none."""
    value = payload.get("lease_generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


class LeaseFence:
    """Follows one execution request's leases through its run's journal (:meth:`see` every
    entry, in sequence order): a ``worker_claimed`` entry opens the lease of its generation to
    its worker, an entry in ``LEASE_ENDS`` closes it. A worker record naming the request is
    fenced only when the lease is open, it names that generation and its actor is that worker."""

    def __init__(self, execution_request_id: str) -> None:
        self.execution_request_id = execution_request_id
        self._holder: tuple[int, str] | None = None

    def see(self, entry: StoredEntry, payload: Mapping[str, Any]) -> Standing:
        if payload.get("execution_request_id") != self.execution_request_id:
            return Standing.OTHER
        if entry.kind == EntryKind.WORKER_CLAIMED.value:
            self._holder = (lease_generation(payload), entry.actor)
        elif entry.kind in _LEASE_END_NAMES:
            self._holder = None
        elif entry.kind in _RECORD_NAMES:
            generation = lease_generation(payload)
            held = generation >= 0 and self._holder == (generation, entry.actor)
            return Standing.FENCED if held else Standing.FOREIGN
        return Standing.OTHER
