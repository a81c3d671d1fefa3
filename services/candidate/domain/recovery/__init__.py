"""Recovery candidates: read-only, like every candidate, and one evaluation for every workflow of
the recovery-workflow registry (``shared.continuity.recovery``; ADR 0013).

The facts are gathered once (``facts.py``). The workflow's candidate kind (a
:class:`~services.candidate.domain.workflows.RecoveryWorkflow`: the checks every recovery reviews
again — the journal chain, the run's origin, the qualified profile, the time-budget protocol, the
resumed checkpoint stored intact — and its own evidence) adds its holds; the registry's descriptor
adds its facts to the one admissibility check of ``shared.continuity.admissibility``. The ledger
runs the same descriptor and check again inside its commit transaction, with the actor's
authority asked again then. A workflow without evidence of its own needs no candidate kind here.

The candidate digest covers everything the decision rests on except who asks: an administrator
and admission (recomputing under its service identity) obtain the same digest. The caller's own
authority is shown as an ``AUTHORITY_MISSING`` hold to an administrator who lacks it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from services.candidate.domain.model import Hold, HoldReason, JournalHead, Requirement
from services.candidate.domain.recovery import readonly_observation, rejected_boundary
from services.candidate.domain.recovery.facts import RECOVERY_CHECKS, Caller, gather_recovery_facts
from services.candidate.domain.sources import CandidateSources
from services.candidate.domain.workflows import RecoveryWorkflow
from shared.continuity.admissibility import check
from shared.continuity.admissibility_facts import Admissible, Handoff
from shared.continuity.canonical import digest_of
from shared.continuity.qualification import is_qualified
from shared.continuity.recovery import DerivedCheckpoint, Inputs
from shared.continuity.recovery import workflow as recovery_workflow
from shared.continuity.timeutil import utc_now

__all__ = ["CANDIDATE_KINDS", "Caller", "RecoveryCandidate", "recovery_candidate"]

#: Holds about the caller, not the evidence: shown, but outside the digest.
CALLER_HOLDS = frozenset({HoldReason.AUTHORITY_MISSING})
#: A workflow whose evidence is the journal alone.
JOURNAL_ONLY: Final = RecoveryWorkflow(checks=RECOVERY_CHECKS)
#: The candidate kinds of the workflows with evidence of their own, by stored name.
CANDIDATE_KINDS: Mapping[str, RecoveryWorkflow] = {
    "rejected_boundary": rejected_boundary.CANDIDATE,
    "readonly_observation": readonly_observation.CANDIDATE,
}


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
    #: The proof the workflow shows (the read-only observation's reconstruction), if any.
    observation: Any = None
    #: What the commit stores that this evaluation computed (one pass of proof), if any.
    commit_inputs: DerivedCheckpoint | None = None


def recovery_candidate(
    name: str,
    sources: CandidateSources,
    run_id: str,
    request_id: str,
    caller: Caller,
    inputs: Inputs | None = None,
    *,
    clock: Callable[[], datetime] = utc_now,
    qualified: Callable[[str], bool] = is_qualified,
) -> RecoveryCandidate:
    """The candidate of the workflow stored as ``name`` for ``request_id``: its inputs are
    validated first (a reviewed rejection field by field: INVALID_ARGUMENT
    REVIEWED_REJECTION_INVALID); ADMISSION_NOT_FOUND when the request was never admitted."""
    workflow = recovery_workflow(name)
    inputs = inputs if inputs is not None else Inputs()
    workflow.validate(inputs)
    kind = CANDIDATE_KINDS.get(workflow.name, JOURNAL_ONLY)
    facts = gather_recovery_facts(
        sources, workflow, run_id, request_id, caller, inputs, clock=clock, qualified=qualified
    )
    holds = [found for check_ in kind.checks for found in check_(facts)]
    evidence = facts.evidence()
    judged = workflow.judge(evidence)
    own = kind.evidence(sources, facts, judged)
    holds += own.holds
    outcome = check(workflow.facts(evidence, judged, facts.situation()))
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
    policy, snapshot = facts.policy, facts.snapshot
    decided_on: dict[str, object] = {
        "workflow": workflow.name,
        "run_id": run_id,
        "request_id": request_id,
        "run_digest": snapshot.run.run_digest,
        "journal_digest": snapshot.head.hash,
        "policy_digest": policy.digest,
        "policy_revision": policy.revision,
        "execution_request_id": facts.history.execution_request_id,
        "state": facts.state,
        "holds": [list(pair) for pair in evidence_holds],
        **own.decided_on,
    }
    return RecoveryCandidate(
        run_id=run_id,
        request_id=request_id,
        eligible=not holds,
        candidate_digest=digest_of(decided_on),
        holds=tuple(holds),
        handoff=handoff,
        policy_revision=policy.revision,
        journal_head=snapshot.head,
        observation=own.proof,
        commit_inputs=own.commit_inputs if not holds else None,
    )
