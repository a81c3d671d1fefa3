"""The never-claimed failed-request recovery candidate: read-only, like every candidate.

It composes the checks every held-run candidate shares (the journal chain, the run's origin —
original attempt, unchanged source and configuration —, the qualified profile and the time-budget
protocol) with the one admissibility check of ``shared.continuity.admissibility`` over the
request's native
event history (``shared.continuity.request_history``). The ledger runs the same check again inside
its
commit transaction, with the actor's authority asked again then.

The candidate digest covers everything the decision rests on except who asks: an administrator
and admission (recomputing under its service identity) obtain the same digest. The caller's own
authority is shown as an ``AUTHORITY_MISSING`` hold to an administrator who lacks it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from shared.continuity.admissibility import ActionFacts, Admissible, Handoff, check
from shared.continuity.canonical import digest_of, intact_blob
from shared.continuity.journal_closure import closure_of
from shared.continuity.qualification import is_qualified
from shared.continuity.readonly_observation import (
    READONLY_OBSERVATION,
    observation_custody,
    readonly_observation_facts,
)
from shared.continuity.rejected_boundary import (
    REJECTED_BOUNDARY,
    ReviewedRejection,
    refusal_problems,
    rejected_boundary_facts,
)
from shared.continuity.rejected_boundary_evidence import report_problems
from shared.continuity.request_history import (
    NEVER_CLAIMED,
    RequestHistory,
    consumed_from,
    never_claimed_facts,
    request_history,
)
from shared.continuity.timeutil import deadline_remaining_seconds, utc_now
from shared.runtime.errors import NotFound

from .checks import common
from .facts import Facts, read_snapshot
from .model import OUTSTANDING_STATES, Entry, Hold, HoldReason, JournalHead, Requirement, hold
from .observation import ObservationCheck, ObservationProof, observation_check
from .reproduction import reproduction_check
from .sources import CandidateSources

#: The checks every held-run candidate shares that a recovery reviews again.
COMMON_CHECKS = (common.chain, common.origin, common.profile_qualified, common.time_budget)
#: Holds about the caller, not the evidence: shown, but outside the digest.
CALLER_HOLDS = frozenset({HoldReason.AUTHORITY_MISSING})


@dataclass(frozen=True)
class Caller:
    """Who asks: an administrator (authority judged now) or admission recomputing."""

    identity: str
    #: Current factory administrator authority.
    has_authority: bool
    recomputing: bool = False
    #: Current execution authority (the rejected boundary needs both).
    has_execution_authority: bool = False


@dataclass(frozen=True)
class RecoveryCandidate:
    run_id: str
    request_id: str
    eligible: bool
    candidate_digest: str
    holds: tuple[Hold, ...]
    handoff: Handoff
    policy_revision: int
    journal_head: JournalHead
    #: Read-only observation only: the consumed turn and its reconstruction.
    observation: ObservationProof | None = None


def never_claimed_candidate(
    sources: CandidateSources,
    run_id: str,
    request_id: str,
    caller: Caller,
    *,
    clock: Callable[[], datetime] = utc_now,
    qualified: Callable[[str], bool] = is_qualified,
) -> RecoveryCandidate:
    """The recovery candidate of ``request_id``; ADMISSION_NOT_FOUND when it was never admitted."""
    return _recovery_candidate(
        sources, run_id, request_id, caller, None, clock=clock, qualified=qualified
    )


def rejected_boundary_candidate(
    sources: CandidateSources,
    run_id: str,
    request_id: str,
    caller: Caller,
    review: ReviewedRejection,
    *,
    clock: Callable[[], datetime] = utc_now,
    qualified: Callable[[str], bool] = is_qualified,
) -> RecoveryCandidate:
    """The rejected-boundary candidate of ``request_id`` under ``review`` (validated field by
    field first: INVALID_ARGUMENT REVIEWED_REJECTION_INVALID)."""
    review.validate()
    return _recovery_candidate(
        sources, run_id, request_id, caller, review, clock=clock, qualified=qualified
    )


def readonly_observation_candidate(
    sources: CandidateSources,
    run_id: str,
    request_id: str,
    caller: Caller,
    *,
    clock: Callable[[], datetime] = utc_now,
    qualified: Callable[[str], bool] = is_qualified,
) -> RecoveryCandidate:
    """The read-only observation candidate of ``request_id``: the consumed turn after the
    refusal recovery, its read custody and its sealed reconstruction."""
    return _recovery_candidate(
        sources,
        run_id,
        request_id,
        caller,
        None,
        clock=clock,
        qualified=qualified,
        observation=True,
    )


def _recovery_candidate(
    sources: CandidateSources,
    run_id: str,
    request_id: str,
    caller: Caller,
    review: ReviewedRejection | None,
    *,
    clock: Callable[[], datetime],
    qualified: Callable[[str], bool],
    observation: bool = False,
) -> RecoveryCandidate:
    snapshot = read_snapshot(sources, run_id)
    policy = sources.policy()
    executions = tuple(sources.execution_requests(run_id))
    now = clock()
    history = request_history(snapshot.entries, request_id)
    if not history.found:
        raise NotFound(
            "ADMISSION_NOT_FOUND",
            f"no admission request {request_id} for run {run_id}",
            metadata={"run_id": run_id, "request_id": request_id},
        )
    facts = Facts(
        version=0,
        snapshot=snapshot,
        policy=policy,
        executions=executions,
        qualified=qualified(snapshot.run.source_profile),
        now=now,
        closure=closure_of(snapshot.entries),
        checkpoint=None,
        response=None,
        analysis=None,
        analysis_refusal=None,
        reconstruction=None,
        reconstruction_refusal=None,
    )
    holds = [found for check_ in COMMON_CHECKS for found in check_(facts)]
    holds += _checkpoint_holds(sources, snapshot.entries, request_id)
    bound = next(
        (e for e in executions if e.execution_request_id == history.execution_request_id), None
    )
    state = bound.state.value if bound is not None else "unknown"
    outstanding = tuple(e.execution_request_id for e in executions if e.state in OUTSTANDING_STATES)
    # Admission recomputes for the digest; the ledger judges the actor at commit.
    actor = history.original_actor if caller.recomputing else caller.identity
    has_authority = caller.recomputing or caller.has_authority
    consumed = consumed_from(
        snapshot.entries,
        snapshot.run.command_limit,
        deadline_remaining_seconds(snapshot.run.active_deadline, now),
    )
    pending_digest = ""  # the reproduced pending request (rejected boundary only)
    observed: ObservationCheck | None = None  # the reconstruction (read-only observation only)
    proof: ObservationProof | None = None
    if observation:
        workflow = READONLY_OBSERVATION
        admissibility, observed, proof = _observation(
            sources,
            snapshot.entries,
            history,
            state=state,
            outstanding=outstanding,
            workflow_enabled=policy.enabled and policy.allow_readonly_observation_recovery,
            actor=actor,
            actor_has_authority=has_authority
            and (caller.recomputing or caller.has_execution_authority),
            consumed=consumed,
        )
        holds += observed.holds
    elif review is None:
        workflow = NEVER_CLAIMED
        admissibility = never_claimed_facts(
            history,
            state=state,
            outstanding=outstanding,
            workflow_enabled=policy.enabled,
            actor=actor,
            actor_has_authority=has_authority,
            consumed=consumed,
        )
    else:
        workflow = REJECTED_BOUNDARY
        holds += _report_holds(sources, review)
        reproduction = reproduction_check(sources, history, review)
        holds += reproduction.holds
        pending_digest = reproduction.reproduction_digest
        problems = refusal_problems(
            history,
            review,
            source_revision=snapshot.run.source_revision,
            pending_checkpoint_digest=bound.checkpoint_digest if bound is not None else "",
        )
        admissibility = rejected_boundary_facts(
            history,
            problems,
            state=state,
            outstanding=outstanding,
            workflow_enabled=policy.enabled and policy.allow_pre_admission_recovery,
            actor=actor,
            actor_has_authority=has_authority
            and (caller.recomputing or caller.has_execution_authority),
            consumed=consumed,
        )
    outcome = check(admissibility)
    handoff = outcome.handoff
    if not isinstance(outcome, Admissible):
        holds += [
            Hold(HoldReason(r.hold), Requirement(r.requirement), r.detail, r.subject)
            for r in outcome.refusals
        ]
    elif holds:
        handoff = replace(handoff, permitted_next_actions=())
    evidence_holds = sorted(
        (h.reason.value, h.subject) for h in holds if h.reason not in CALLER_HOLDS
    )
    decided_on: dict[str, object] = {
        "workflow": workflow,
        "run_id": run_id,
        "request_id": request_id,
        "run_digest": snapshot.run.run_digest,
        "journal_digest": snapshot.head.hash,
        "policy_digest": policy.digest,
        "policy_revision": policy.revision,
        "execution_request_id": history.execution_request_id,
        "state": state,
        "holds": [list(pair) for pair in evidence_holds],
    }
    if review is not None:
        # the review is part of what the decision rests on
        decided_on["reviewed_rejection_digest"] = review.digest
        decided_on["pending_reproduction_digest"] = pending_digest
    if observed is not None:
        # the reconstructed continuation is part of what the decision rests on
        decided_on["observation_checkpoint_digest"] = observed.derived_checkpoint_digest
        decided_on["observation_witness_digest"] = observed.witness_digest
    return RecoveryCandidate(
        run_id=run_id,
        request_id=request_id,
        eligible=not holds,
        candidate_digest=digest_of(decided_on),
        holds=tuple(holds),
        handoff=handoff,
        policy_revision=policy.revision,
        journal_head=snapshot.head,
        observation=proof,
    )


def _observation(
    sources: CandidateSources,
    entries: tuple[Entry, ...],
    history: RequestHistory,
    **common: Any,
) -> tuple[ActionFacts, ObservationCheck, ObservationProof]:
    """The read-only observation's facts: the journal's read custody, judged by the shared
    module, and the sealed reconstruction of the consumed turn from the stored bytes."""
    custody = observation_custody(entries, history)
    observed = observation_check(sources, custody)
    facts = readonly_observation_facts(history, custody, **common)
    return facts, observed, ObservationProof.of(custody, observed)


def _report_holds(sources: CandidateSources, review: ReviewedRejection) -> list[Hold]:
    """The review's source-validator and executable-probe reports are pinned: stored intact and
    made for the reviewed source revision, executable identity and provider epoch."""
    return [
        hold(
            HoldReason.CLOSURE_INCOMPLETE if problem.missing else HoldReason.REFUSAL_NOT_PROVEN,
            problem.digest,
            problem.detail,
        )
        for problem in report_problems(review, sources.blob)
    ]


def _checkpoint_holds(
    sources: CandidateSources, entries: tuple[Entry, ...], request_id: str
) -> list[Hold]:
    """The checkpoint the request resumes from (the settlement's derived checkpoint) is stored
    intact."""
    settlement = next(
        (
            e
            for e in entries
            if e.kind == "migration_settlement" and e.text("request_id") == request_id
        ),
        None,
    )
    digest = settlement.text("derived_checkpoint_digest") if settlement else ""
    if intact_blob(sources.blob, digest) is not None:
        return []
    return [
        hold(
            HoldReason.CLOSURE_INCOMPLETE,
            digest or "derived_checkpoint_digest",
            "the checkpoint the request resumes from is not stored intact",
        )
    ]
