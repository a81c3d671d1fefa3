"""The handoff payload (spec 001): what the journal proves happened, which outcomes stay open,
what is still owed, which next actions the admissibility check permits, and what was consumed.

``permitted_next_actions`` is the output of the check, not the API surface: only the actions that
can clear this candidate's holds (or submit it, when eligible) and reading the journal.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final

from services.candidate.domain.journal import (
    COMMAND_EXECUTED,
    TOOL_CALL_GRANTED,
    TOOL_INTENT,
    TOOL_OUTCOME,
    Closure,
)
from services.candidate.domain.model import (
    Entry,
    Hold,
    HoldReason,
    Requirement,
    RunRecord,
)
from shared.continuity.admissibility_facts import (
    Consumed,
    Handoff,
    KnownEffect,
    PermittedAction,
    RemainingObligation,
    UnresolvedAlternative,
)
from shared.continuity.journal_closure import RESPONSE_CONSUMED
from shared.continuity.timeutil import deadline_remaining_seconds

# A started or durable-unknown effect: the evidence permits every one of these.
UNKNOWN_OUTCOME: Final = ("failed", "committed", "in_flight")
# A granted call with no retained outcome and no recorded start.
NOT_RETAINED: Final = ("completed_result_not_retained", "not_started")
KNOWN_OUTCOMES: Final = frozenset({"succeeded", "failed"})

REQUEST_CONTINUITY: Final = PermittedAction(
    "request_invalid_read_continuity",
    "submit the exact candidate, run, journal and policy digests with version 1, a bounded "
    "valid_for_seconds and the three acknowledgements",
)
UPDATE_POLICY: Final = PermittedAction(
    "update_policy",
    "a factory administrator enables the continuity policy (or the setting this version needs)",
)
RECONCILE_CUSTODY: Final = PermittedAction(
    "reconcile_custody",
    "reconcile the native tool and command custody under its original rules",
)
QUALIFY_PROFILE: Final = PermittedAction(
    "qualify_source_profile",
    "qualify and register a current source profile covering the installed migration code",
)
READ_TICKET: Final = PermittedAction(
    "read_existing_ticket",
    "read the outstanding admission ticket and its execution request instead of submitting another",
)
INSPECT_JOURNAL: Final = PermittedAction(
    "inspect_journal", "read and verify the run's native journal (a read; changes nothing)"
)


def _known_effects(entries: Sequence[Entry]) -> list[KnownEffect]:
    effects: list[KnownEffect] = []
    for entry in entries:
        text = entry.text
        if entry.kind == RESPONSE_CONSUMED:
            description = (
                f"model response {text('response_digest')} consumed for request "
                f"{text('request_id')}"
            )
        elif entry.kind == TOOL_CALL_GRANTED:
            description = f"tool call {text('call_id')} ({text('tool_name')}) granted"
        elif entry.kind == TOOL_OUTCOME and text("status") in KNOWN_OUTCOMES:
            description = f"tool call {text('call_id')} {text('status')}"
        elif entry.kind == COMMAND_EXECUTED:
            description = f"command {text('command_id')} executed"
        else:
            continue
        effects.append(KnownEffect(description, entry.sequence))
    return effects


def _unresolved(
    entries: Sequence[Entry], rejected_evidence_call: str
) -> list[UnresolvedAlternative]:
    found: dict[str, tuple[str, ...]] = {}
    outcomes = {e.text("call_id") for e in entries if e.kind == TOOL_OUTCOME}
    started = {e.text("call_id") for e in entries if e.kind == TOOL_INTENT}
    for entry in entries:  # by kind first: most entries of a long journal are never parsed
        if entry.kind == TOOL_OUTCOME:
            if entry.text("status") == "unknown":
                found.setdefault(entry.text("call_id"), UNKNOWN_OUTCOME)
        elif entry.kind == TOOL_CALL_GRANTED:
            call_id = entry.text("call_id")
            if call_id not in outcomes and call_id != rejected_evidence_call:
                found.setdefault(call_id, UNKNOWN_OUTCOME if call_id in started else NOT_RETAINED)
    return [UnresolvedAlternative(subject, alternatives) for subject, alternatives in found.items()]


def _permitted(holds: Sequence[Hold], eligible: bool) -> list[PermittedAction]:
    requirements = {h.requirement for h in holds}
    reasons = {h.reason for h in holds}
    actions: list[PermittedAction] = []
    if eligible:
        actions.append(REQUEST_CONTINUITY)
    if Requirement.POLICY in requirements:
        actions.append(UPDATE_POLICY)
    if Requirement.CUSTODY in requirements:
        actions.append(RECONCILE_CUSTODY)
    if Requirement.QUALIFICATION in requirements:
        actions.append(QUALIFY_PROFILE)
    if HoldReason.CLAIM_OUTSTANDING in reasons:
        actions.append(READ_TICKET)
    actions.append(INSPECT_JOURNAL)
    return actions


def _obligations(
    run: RunRecord,
    closure: Closure,
    holds: Sequence[Hold],
    unresolved: Sequence[UnresolvedAlternative],
) -> list[RemainingObligation]:
    if closure.consume is not None:
        start = f"the response consumed at journal sequence {closure.consume.sequence}"
    elif closure.request is not None:
        start = f"model request {closure.request_id} (its response was never consumed)"
    else:
        start = "the original checkpoint"
    blocked = ", ".join(dict.fromkeys(h.reason.value for h in holds))
    obligations = [
        RemainingObligation(
            f"continue task {run.task_id} in attempt {run.attempt_id} from {start}", blocked
        )
    ]
    for open_call in unresolved:
        if open_call.alternatives == UNKNOWN_OUTCOME:
            obligations.append(
                RemainingObligation(
                    f"settle the outcome of tool call {open_call.subject}",
                    "its effect may have happened; native reconciliation decides",
                )
            )
        else:
            obligations.append(
                RemainingObligation(
                    f"account for tool call {open_call.subject}",
                    "its original result was not retained",
                )
            )
    return obligations


def _resources(run: RunRecord, entries: Sequence[Entry], now: datetime) -> Consumed:
    commands = {e.text("command_id") for e in entries if e.kind == COMMAND_EXECUTED}
    return Consumed(
        model_responses=sum(1 for e in entries if e.kind == RESPONSE_CONSUMED),
        tool_calls=sum(1 for e in entries if e.kind == TOOL_CALL_GRANTED),
        commands_used=len(commands),
        command_limit=run.command_limit,
        deadline_remaining_seconds=deadline_remaining_seconds(run.active_deadline, now),
    )


def build_handoff(
    *,
    run: RunRecord,
    entries: Sequence[Entry],
    closure: Closure,
    holds: Sequence[Hold],
    eligible: bool,
    rejected_evidence_call: str,
    now: datetime,
) -> Handoff:
    unresolved = _unresolved(entries, rejected_evidence_call)
    return Handoff(
        known_effects=tuple(_known_effects(entries)),
        unresolved_alternatives=tuple(unresolved),
        remaining_obligations=tuple(_obligations(run, closure, holds, unresolved)),
        permitted_next_actions=tuple(_permitted(holds, eligible)),
        consumed=_resources(run, entries, now),
    )
