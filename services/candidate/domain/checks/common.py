"""Checks every held-run candidate shares: the journal's integrity, held state, origin, closure
and custody, and the current policy, profile, time budget and claims.

Each check is a pure function of the gathered :class:`Facts` returning the holds it finds (in the
order it finds them); none depends on another having run.
"""

from __future__ import annotations

from services.candidate.domain.checks import HeldRun
from services.candidate.domain.facts import Facts
from services.candidate.domain.journal import (
    RUN_STARTED,
    TOOL_CALL_GRANTED,
    TOOL_INTENT,
    TOOL_OUTCOME,
    check_chain,
)
from services.candidate.domain.model import OUTSTANDING_STATES, Hold, HoldReason, hold, hold_maker
from shared.continuity.call_binding import grant_problems
from shared.continuity.qualification import qualification_problem
from shared.contract.terms import SUPPORTED_TIME_BUDGET_PROTOCOLS


def chain(facts: HeldRun) -> list[Hold]:
    """The first break of the chain, by the ledger's verification or our own recomputation."""
    breaks: list[tuple[int, str]] = []
    verification = facts.snapshot.verification
    if not verification.valid:
        breaks.append((verification.first_broken_sequence, verification.problem))
    local = check_chain(facts.entries, facts.head, facts.snapshot.recomputed)
    if local is not None:
        breaks.append((local.sequence, local.problem))
    if not breaks:
        return []
    sequence, problem = min(breaks)
    return [
        hold(
            HoldReason.JOURNAL_CHAIN_BROKEN,
            str(sequence),
            f"the journal chain breaks at sequence {sequence} ({problem or 'unverified'})",
        )
    ]


def held_state(facts: Facts) -> list[Hold]:
    """The journal ends with run_held."""
    if facts.final_held is not None:
        return []
    last = facts.entries[-1] if facts.entries else None
    return [
        hold(
            HoldReason.RUN_NOT_HELD,
            str(last.sequence if last else 0),
            f"the last journal entry is {last.kind if last else 'absent'}, not run_held",
        )
    ]


def origin(facts: HeldRun) -> list[Hold]:
    """run_started proves the run's original task attempt, source and configuration."""
    run = facts.run
    starts = [e for e in facts.entries if e.kind == RUN_STARTED]
    holds: list[Hold] = []
    if not starts:
        holds.append(
            hold(
                HoldReason.ATTEMPT_MISMATCH,
                RUN_STARTED,
                "the journal has no run_started entry: the original task attempt is unproven",
            )
        )
    for start in starts:
        found = (start.text("task_id"), start.text("attempt_id"))
        if found != (run.task_id, run.attempt_id):
            holds.append(
                hold(
                    HoldReason.ATTEMPT_MISMATCH,
                    str(start.sequence),
                    f"run_started at sequence {start.sequence} names task {found[0]!r} "
                    f"attempt {found[1]!r}, not the run's task {run.task_id!r} "
                    f"attempt {run.attempt_id!r}",
                )
            )
        for name, expected in (
            ("source_revision", run.source_revision),
            ("configuration_digest", run.configuration_digest),
        ):
            if start.text(name) != expected:
                holds.append(
                    hold(
                        HoldReason.SOURCE_OR_CONFIGURATION_CHANGED,
                        name,
                        f"run_started at sequence {start.sequence} records {name} "
                        f"{start.text(name)!r}, the run is registered with {expected!r}",
                    )
                )
    return holds


def _blob_missing(digest: str, what: str) -> Hold:
    return hold(
        HoldReason.CLOSURE_INCOMPLETE,
        digest or what,
        f"the {what} blob {digest or '(none)'} named in the journal is not stored intact",
    )


def closure(facts: Facts) -> list[Hold]:
    """The last model request has its stored checkpoint, its consume (with its time) and both
    blobs intact."""
    closure = facts.closure
    if closure.request is None:
        return [
            hold(
                HoldReason.CLOSURE_INCOMPLETE,
                "model_request_sent",
                "the journal records no model request",
            )
        ]
    holds: list[Hold] = []
    if closure.consume is None:
        holds.append(
            hold(
                HoldReason.CONSUME_MISSING,
                closure.request_id,
                f"model request {closure.request_id!r} (sequence {closure.request.sequence}) "
                "is not followed by its response_consumed",
            )
        )
    if closure.checkpoint_stored is None:
        holds.append(
            hold(
                HoldReason.CLOSURE_INCOMPLETE,
                closure.checkpoint_digest or str(closure.request.sequence),
                f"no checkpoint_stored of {closure.checkpoint_digest or '(none)'} precedes "
                f"model request {closure.request_id!r}",
            )
        )
    if facts.checkpoint is None:
        holds.append(_blob_missing(closure.checkpoint_digest, "checkpoint"))
    if closure.consume is not None:
        if facts.response is None:
            holds.append(_blob_missing(closure.response_digest, "consumed response"))
        if not closure.consumed_at:
            holds.append(
                hold(
                    HoldReason.CLOSURE_INCOMPLETE,
                    str(closure.consume.sequence),
                    "response_consumed does not record its consumption time (consumed_at)",
                )
            )
    return holds


def custody_after_consume(facts: Facts) -> list[Hold]:
    """After the consume only the grants of the response's calls (one each, matching) and the
    final run_held may follow; between request and consume nothing may. Without an analysis the
    calls are unknown and only their grants' position is checked."""
    request, consume = facts.closure.request, facts.closure.consume
    if request is None:
        return []
    calls = facts.calls
    expected = {c.call_id: c.tool_name for c in calls} if calls is not None else None
    final_held = facts.final_held
    holds: list[Hold] = []
    granted: set[str] = set()
    # Looked up once: a held long journal has one hold per entry after its consume.
    requested_at = request.sequence
    consumed_at = consume.sequence if consume is not None else None
    unaccounted = hold_maker(HoldReason.UNACCOUNTED_EFFECTS)
    for entry in facts.entries:
        sequence = entry.sequence
        if sequence <= requested_at or entry is final_held or sequence == consumed_at:
            continue
        if consumed_at is not None and sequence > consumed_at and entry.kind == TOOL_CALL_GRANTED:
            call_id = entry.text("call_id")
            if expected is None or (
                expected.get(call_id) == entry.text("tool_name") and call_id not in granted
            ):
                granted.add(call_id)
                continue
        holds.append(
            unaccounted(
                str(sequence),
                f"{entry.kind} at sequence {sequence} is not accounted for by the "
                "consumed response",
            )
        )
    holds += _grants_unbound(facts)
    if consume is not None and expected is not None:
        holds += [
            hold(
                HoldReason.CLOSURE_INCOMPLETE,
                call_id,
                f"tool call {call_id!r} of the consumed response has no grant",
            )
            for call_id in expected
            if call_id not in granted
        ]
    return holds


def _grants_unbound(facts: Facts) -> list[Hold]:
    """Each grant of a consumed call binds its original grant, argument digest and source cut
    (``shared/continuity/call_binding.py``): the grant the call's contract gives it, the digest
    of the arguments the pinned SDK parsed from the consumed response, and the run's source
    revision. Without an analysis the calls are unknown and nothing is compared."""
    consume, calls = facts.closure.consume, facts.calls
    if consume is None or calls is None:
        return []
    by_id = {c.call_id: c for c in calls}
    holds: list[Hold] = []
    for entry in facts.entries:
        if entry.sequence <= consume.sequence or entry.kind != TOOL_CALL_GRANTED:
            continue  # before the payload: most entries of a long journal are never parsed
        call = by_id.get(entry.text("call_id"))
        if call is None:
            continue
        if not call.grant:
            continue  # not in the contract: held as an unknown call already
        holds += [
            hold(HoldReason.CALL_NOT_BOUND, call.call_id, problem)
            for problem in grant_problems(
                call.call_id,
                entry.payload or {},
                source_revision=facts.run.source_revision,
                args_digest=call.args_digest,
                grant=call.grant,
            )
        ]
    return holds


def unknown_outcomes(facts: Facts) -> list[Hold]:
    """No tool call has a durable unknown outcome, and no granted call has a durable intent
    without an outcome (the effect may have happened): native reconciliation settles both,
    which keep their original rules; the handoff lists the same calls as unresolved."""
    holds = [
        hold(
            HoldReason.UNRESOLVED_CUSTODY,
            entry.text("call_id") or str(entry.sequence),
            f"tool call {entry.text('call_id')!r} has a durable unknown outcome at "
            f"sequence {entry.sequence}; it needs its original native reconciliation",
        )
        for entry in facts.entries
        if entry.kind == TOOL_OUTCOME and entry.text("status") == "unknown"
    ]
    # An intent after the consumed turn's request is an unaccounted effect already
    # (custody_after_consume): the calls judged here are the earlier ones.
    request = facts.closure.request
    before = request.sequence if request is not None else None
    granted: set[str] = set()
    outcomes: set[str] = set()
    intents: dict[str, int] = {}
    for entry in facts.entries:  # by kind first: most entries of a long journal are never parsed
        if entry.kind == TOOL_CALL_GRANTED:
            granted.add(entry.text("call_id"))
        elif entry.kind == TOOL_OUTCOME:
            outcomes.add(entry.text("call_id"))
        elif entry.kind == TOOL_INTENT and (before is None or entry.sequence < before):
            intents.setdefault(entry.text("call_id"), entry.sequence)
    holds += [
        hold(
            HoldReason.UNRESOLVED_CUSTODY,
            call_id,
            f"tool call {call_id!r} has a durable intent at sequence {sequence} and no outcome; "
            "its effect may have happened: it needs its original native reconciliation",
        )
        for call_id, sequence in intents.items()
        if call_id in granted and call_id not in outcomes
    ]
    return holds


def policy_enabled(facts: Facts) -> list[Hold]:
    policy = facts.policy
    if policy.enabled:
        return []
    return [
        hold(
            HoldReason.POLICY_DISABLED,
            "enabled",
            f"continuity policy revision {policy.revision} is disabled",
        )
    ]


def profile_qualified(facts: HeldRun) -> list[Hold]:
    profile = facts.run.source_profile
    if facts.qualified:
        return []
    # Which part of the registered profile digest differs from the installed code, when the
    # registry says so (an injected qualification has no registry to ask).
    problem = qualification_problem(profile)
    return [
        hold(
            HoldReason.PROFILE_NOT_QUALIFIED,
            profile,
            problem or f"source profile {profile!r} is not a current qualified profile",
        )
    ]


def time_budget(facts: HeldRun) -> list[Hold]:
    protocol = facts.run.time_budget_protocol
    if protocol in SUPPORTED_TIME_BUDGET_PROTOCOLS:
        return []
    supported = " or ".join(repr(p) for p in sorted(SUPPORTED_TIME_BUDGET_PROTOCOLS))
    return [
        hold(
            HoldReason.TIME_BUDGET_UNSUPPORTED,
            protocol,
            f"time-budget protocol {protocol!r} is not {supported}",
        )
    ]


def outstanding_claims(facts: Facts) -> list[Hold]:
    """No execution request of the run is queued or claimed."""
    return [
        hold(
            HoldReason.CLAIM_OUTSTANDING,
            execution.execution_request_id,
            f"execution request {execution.execution_request_id} (admission "
            f"{execution.request_id!r}) is {execution.state.value}",
        )
        for execution in facts.executions
        if execution.state in OUTSTANDING_STATES
    ]
