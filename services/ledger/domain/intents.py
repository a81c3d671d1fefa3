"""Effect intents a request left open: a ``tool_intent`` journaled before an effect with no
``succeeded`` or ``failed`` ``tool_outcome`` for its call after it. What a reconciliation
verifier classifies the lost owner's effects by (ADR 0017)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.ledger.domain.journal import EntryKind, StoredEntry

#: Tool outcome statuses that close an intent: its effect's result is known. ``unknown`` closes
#: nothing.
CLOSING_STATUSES = frozenset({"succeeded", "failed"})


@dataclass(frozen=True)
class OpenIntent:
    """An effect that may have happened without the journal knowing its result."""

    call_id: str
    tool_name: str
    #: The contract's grant of the tool ("read", "command"); "" when the intent named none.
    grant: str
    sequence: int


@dataclass
class IntentTracker:
    """Collects the intents and closing outcomes of one request's entries, in sequence order."""

    intents: dict[str, OpenIntent] = field(default_factory=dict)
    #: call id -> sequence of its latest closing outcome
    closed: dict[str, int] = field(default_factory=dict)

    def add(self, entry: StoredEntry, payload: Mapping[str, Any]) -> None:
        call_id = payload.get("call_id")
        if not isinstance(call_id, str):
            return
        if entry.kind == EntryKind.TOOL_INTENT.value:
            self.intents.setdefault(
                call_id,
                OpenIntent(
                    call_id,
                    str(payload.get("tool_name", "")),
                    str(payload.get("grant", "")),
                    entry.sequence,
                ),
            )
        elif (
            entry.kind == EntryKind.TOOL_OUTCOME.value and payload.get("status") in CLOSING_STATUSES
        ):
            self.closed[call_id] = entry.sequence

    def still_open(self, latest_status: Mapping[str, str]) -> tuple[OpenIntent, ...]:
        """Intents with no closing outcome after them, or whose call's latest outcome anywhere
        in the run (``latest_status``) is ``unknown``."""
        return tuple(
            intent
            for call, intent in self.intents.items()
            if self.closed.get(call, 0) < intent.sequence or latest_status.get(call) == "unknown"
        )
