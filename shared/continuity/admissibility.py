"""The one admissibility check in front of every recovery action (spec 001; ADR 0009).

``check(facts)`` answers ``Admissible`` or ``Unresolved``. It covers four concerns: an expired or
spent action identity, authorization timing, dependencies (an outstanding ticket or claim the
action would bypass) and residual effects (a request that may still land). It is pure: the
candidate service calls it to show holds, the ledger calls it again inside the commit transaction.

Time is not an input. Lease expiry and the remaining deadline are reported in the handoff but no
rule reads them, so waiting never turns ``Unresolved`` into ``Admissible``; only new native
evidence changes the facts. Probability is no input either.

A reconciliation of a claimed request whose owner was lost (ADR 0010) passes the same check with
``ReconciliationFacts``: a recorded, unexpired verification (computed by the caller into
``verification_problems``; the check itself stays time-free) resolves the claim's residual effect
for ``retry_stage``; ``mark_unresolved`` records what stays unknown and needs identity, authority
and either verified cessation or the administrator's acknowledgement that it is unproven (spec
002: the active claim is released only after verified cessation; ADR 0045).

A continuation action the ledger's own rules refused (a worker claim, a fenced write, a cancel, a
commit; ADR 0046) comes with ``RefusedAction`` facts: those refusals are the check's, and it adds
the handoff (what the refusal leaves permitted next), so every refusal's handoff is made here.
The facts and answers are the dataclasses of ``shared.continuity.admissibility_facts``.
"""

from __future__ import annotations

from shared.continuity.admissibility_facts import (
    DECIDED_STATES,
    LEASE,
    MARK_UNRESOLVED,
    RETRY_STAGE,
    REVIEW,
    TICKET,
    UNCLAIMED_END_STATES,
    ActionFacts,
    Admissible,
    BoundRequest,
    Concern,
    Handoff,
    KnownEffect,
    Outcome,
    PermittedAction,
    ReconciliationFacts,
    Refusal,
    RemainingObligation,
    Unresolved,
    UnresolvedAlternative,
)

CLAIM_ALTERNATIVES = ("failed", "committed", "in_flight")


#: The next step each requirement only a refused action names (and the two a claim's own checks
#: add) leaves to its caller.
_REFUSED_ACTION_STEPS: dict[str, tuple[str, str]] = {
    LEASE: (
        "read_execution_request",
        "read the request back: its lease is not the caller's; start no effect under it",
    ),
    REVIEW: (
        "read_candidate",
        "the state moved after the review: read the current candidate and review it again",
    ),
    TICKET: (
        "read_existing_ticket",
        "read the outstanding ticket and its execution request instead of submitting another",
    ),
    "QUALIFICATION": (
        "qualify_source_profile",
        "qualify and register a current source profile covering the installed migration code",
    ),
    "SOURCE": (
        "present_run_source",
        "a worker presents the run's attempt, source revision, configuration and profile",
    ),
}


def _claim_unresolved(bound: BoundRequest) -> bool:
    """A worker claim whose outcome the evidence leaves open (failed, committed or in flight)."""
    return (bound.state == "claimed" or (bound.claimed and not _claim_resolved(bound))) and not (
        bound.cessation_verified
    )


def _claim_resolved(bound: BoundRequest) -> bool:
    """A worker claim whose outcome native evidence settles for the workflow asking."""
    return bound.refusal_reviewed or bound.observation_proven


def _claim_outstanding(execution_request_id: str, detail: str) -> Refusal:
    """The dependency refusal: a queued or claimed request the action would bypass."""
    return Refusal(
        Concern.DEPENDENCY, "CLAIM_OUTSTANDING", "NOT_ELIGIBLE", execution_request_id, detail
    )


def _outstanding(facts: ActionFacts) -> list[Refusal]:
    """One refusal for each other execution request of the run still queued or claimed."""
    return [
        _claim_outstanding(other, f"execution request {other} is queued or claimed")
        for other in facts.outstanding
    ]


def _refusals(facts: ActionFacts) -> list[Refusal]:
    if facts.refused is not None:
        # the ledger's own rules already decided (ADR 0046); the check adds the handoff
        return list(facts.refused.refusals)
    if facts.reconciliation is not None:
        return _reconciliation_refusals(facts, facts.reconciliation)
    bound, found = facts.bound, []
    # expired or spent action identity: one recovery per request and workflow
    for recovery_id in facts.spent_by:
        found.append(
            Refusal(
                Concern.ACTION_IDENTITY,
                "RECOVERY_SPENT",
                "NOT_ELIGIBLE",
                recovery_id,
                f"recovery {recovery_id} already used this request's one {facts.workflow} action",
            )
        )
    # authorization timing: evaluated again inside the commit transaction
    if not facts.workflow_enabled:
        found.append(
            Refusal(
                Concern.AUTHORIZATION,
                "POLICY_DISABLED",
                "POLICY",
                "policy",
                f"the policy does not enable the {facts.workflow} workflow",
            )
        )
    if facts.actor != facts.original_actor or not facts.actor_has_authority:
        found.append(
            Refusal(
                Concern.AUTHORIZATION,
                "AUTHORITY_MISSING",
                "AUTHORITY",
                facts.actor,
                f"only {facts.original_actor}, the ticket's original operator, with current "
                f"{facts.required_authority} authority may act",
            )
        )
    # dependencies: an outstanding ticket or claim the action would bypass
    if bound.state == "queued" and not bound.claimed:
        found.append(
            _claim_outstanding(
                bound.execution_request_id, "the request is still queued; it has not failed"
            )
        )
    found += _outstanding(facts)
    found += _residual_effects(facts)
    return found


def _residual_effects(facts: ActionFacts) -> list[Refusal]:
    """Anything that may still land refuses the action in every state the evidence permits."""
    bound, found = facts.bound, []
    if facts.refusal_problems is not None:
        # the rejected-boundary workflow: the reviewed refusal must be proven by native evidence
        for problem in facts.refusal_problems:
            found.append(
                Refusal(
                    Concern.RESIDUAL_EFFECT,
                    "REFUSAL_NOT_PROVEN",
                    "CUSTODY",
                    bound.execution_request_id,
                    problem,
                )
            )
    for problem in facts.observation_problems or ():
        found.append(
            Refusal(
                Concern.RESIDUAL_EFFECT,
                "OBSERVATION_NOT_PROVEN",
                "CUSTODY",
                bound.execution_request_id,
                problem,
            )
        )
    if bound.state == "claimed" or (bound.claimed and not _claim_resolved(bound)):
        found.append(
            Refusal(
                Concern.RESIDUAL_EFFECT,
                "WORKER_CLAIMED",
                "CUSTODY",
                bound.execution_request_id,
                "a worker claimed the request; its outcome needs native reconciliation",
            )
        )
    elif (
        facts.refusal_problems is None
        and facts.observation_problems is None
        and bound.state != "queued"
        and not (bound.state in UNCLAIMED_END_STATES and bound.failed_unclaimed)
    ):
        found.append(
            Refusal(
                Concern.RESIDUAL_EFFECT,
                "REQUEST_NOT_FAILED_UNCLAIMED",
                "NOT_ELIGIBLE",
                bound.execution_request_id,
                f"the request is {bound.state}; its native history does not prove a failure "
                "before any worker claim",
            )
        )
    for sequence in facts.unaccounted_sequences:
        found.append(
            Refusal(
                Concern.RESIDUAL_EFFECT,
                "UNACCOUNTED_EFFECTS",
                "CUSTODY",
                str(sequence),
                f"journal entry {sequence} after the failure is not accounted for",
            )
        )
    for subject in facts.uncertain:
        found.append(
            Refusal(
                Concern.RESIDUAL_EFFECT,
                "UNRESOLVED_CUSTODY",
                "CUSTODY",
                subject,
                f"the outcome of {subject} is unknown and durable",
            )
        )
    return found


def _reconciliation_refusals(facts: ActionFacts, reconciling: ReconciliationFacts) -> list[Refusal]:
    """A claimed request whose owner was lost: MARK_UNRESOLVED records what stays unknown, so
    only identity, authority, the claim and unproven cessation (unless acknowledged) refuse it;
    RETRY_STAGE must also clear the policy, every dependency, residual effect and budget
    concern."""
    bound, found = facts.bound, []
    # spent action identity: one decision per execution request
    for reconciliation_id in facts.spent_by:
        found.append(
            Refusal(
                Concern.ACTION_IDENTITY,
                "RECOVERY_SPENT",
                "NOT_ELIGIBLE",
                reconciliation_id,
                f"reconciliation {reconciliation_id} already decided this request",
            )
        )
    # authorization timing: any current factory administrator, asked inside the transaction
    if not facts.actor_has_authority:
        found.append(
            Refusal(
                Concern.AUTHORIZATION,
                "AUTHORITY_MISSING",
                "AUTHORITY",
                facts.actor,
                f"{facts.actor} lacks current factory administrator authority",
            )
        )
    if reconciling.decision == RETRY_STAGE and not facts.workflow_enabled:
        found.append(
            Refusal(
                Concern.AUTHORIZATION,
                "POLICY_DISABLED",
                "POLICY",
                "policy",
                "the policy is disabled: a retry could not be claimed",
            )
        )
    # A request a decision already reconciled was claimed: its block is the spent decision
    # above, and "not claimed" would misstate its history (issue 47).
    decided = bool(facts.spent_by) and bound.state in DECIDED_STATES
    if bound.state != "claimed" and not decided:
        found.append(
            Refusal(
                Concern.RESIDUAL_EFFECT,
                "REQUEST_NOT_CLAIMED",
                "NOT_ELIGIBLE",
                bound.execution_request_id,
                f"the request is {bound.state}; only a claimed request whose owner was lost is "
                "reconciled",
            )
        )
    if reconciling.decision != RETRY_STAGE:
        # 002: the active claim (and its pending slot) is released only after verified
        # cessation, or by an administrator who records the cessation as unproven
        if (
            bound.state == "claimed"
            and not bound.cessation_verified
            and not reconciling.cessation_unproven_acknowledged
        ):
            found.append(
                Refusal(
                    Concern.RESIDUAL_EFFECT,
                    "RECONCILIATION_NOT_VERIFIED",
                    "CUSTODY",
                    bound.execution_request_id,
                    "cessation of the prior owner is not verified: marking the request "
                    "unresolved would release its claim while the owner may still run; record "
                    "a verification, or acknowledge the cessation as unproven",
                )
            )
        return found
    found += _outstanding(facts)
    # residual effects: a possibly running owner or excess exposure refuses the retry
    if not bound.cessation_verified:
        for problem in reconciling.verification_problems or ("no verification recorded",):
            found.append(
                Refusal(
                    Concern.RESIDUAL_EFFECT,
                    "RECONCILIATION_NOT_VERIFIED",
                    "CUSTODY",
                    bound.execution_request_id,
                    problem,
                )
            )
    for sequence in facts.unaccounted_sequences:
        found.append(
            Refusal(
                Concern.RESIDUAL_EFFECT,
                "UNACCOUNTED_EFFECTS",
                "CUSTODY",
                str(sequence),
                f"journal entry {sequence} after the claim is not accounted for",
            )
        )
    for subject in facts.uncertain:
        found.append(
            Refusal(
                Concern.RESIDUAL_EFFECT,
                "UNRESOLVED_CUSTODY",
                "CUSTODY",
                subject,
                f"the outcome of {subject} is unknown and durable",
            )
        )
    # an exhausted budget still blocks the retry: reconciliation adds no allowance
    for problem in reconciling.budget_problems:
        found.append(
            Refusal(
                Concern.AUTHORIZATION,
                "BUDGET_EXHAUSTED",
                "NOT_ELIGIBLE",
                bound.execution_request_id,
                problem,
            )
        )
    return found


def _permitted(facts: ActionFacts, refusals: list[Refusal]) -> tuple[PermittedAction, ...]:
    """The next actions that stay safe in every state the evidence permits."""
    reconciling = facts.reconciliation is not None
    if not refusals:
        how = (
            "decide with the inspection's reconciliation_digest, expected state and lease "
            "generation, and an evidence reference"
            if reconciling
            else "submit the candidate's digest with every acknowledgement"
        )
        return (PermittedAction(facts.action, how),)
    actions: dict[str, str] = {}
    for refusal in refusals:
        if refusal.concern is Concern.ACTION_IDENTITY and reconciling:
            actions["read_reconciliation"] = "read the saved decision back; it cannot be replaced"
        elif refusal.concern is Concern.ACTION_IDENTITY:
            actions["read_recovery"] = "read the saved recovery back; it cannot be replaced"
        elif refusal.requirement == "POLICY":
            actions["update_policy"] = "a factory administrator may enable the workflow"
        elif refusal.requirement in _REFUSED_ACTION_STEPS:
            actions.update((_REFUSED_ACTION_STEPS[refusal.requirement],))
        elif refusal.concern is Concern.AUTHORIZATION:
            actions["obtain_authority"] = "the original operator needs current authority"
        elif refusal.requirement == "CUSTODY" and reconciling:
            actions["verify_reconciliation"] = (
                "a deployment verifier must prove cessation, bounded exposure and no effect"
            )
        elif refusal.requirement == "CUSTODY":
            actions["reconcile_custody"] = "reconcile the request under its native rules"
    if facts.refused is not None and facts.bound.state == "claimed":
        # only a claimed request's lost owner is reconciled (a failed one keeps its native rules)
        actions["inspect_reconciliation"] = (
            "a factory administrator inspects the claim; once its owner is lost, reconciliation "
            "decides (ADR 0010)"
        )
    if (
        reconciling
        # what refuses MARK_UNRESOLVED too: a spent identity, missing authority, no claim
        and not any(
            r.hold in ("RECOVERY_SPENT", "AUTHORITY_MISSING", "REQUEST_NOT_CLAIMED")
            for r in refusals
        )
    ):
        actions[MARK_UNRESOLVED] = (
            "record the request as terminal unresolved; nothing is retried"
            if facts.bound.cessation_verified
            else "record the request as terminal unresolved, nothing retried; without verified "
            "cessation only by acknowledging it unproven (cessation_unproven_acknowledged): the "
            "claim is then released while its owner may still run"
        )
    return tuple(PermittedAction(name, why) for name, why in sorted(actions.items()))


def _handoff(facts: ActionFacts, refusals: list[Refusal]) -> Handoff:
    bound = facts.bound
    unresolved = [bound.execution_request_id] if _claim_unresolved(bound) else []
    obligation = RemainingObligation(
        f"continue request {bound.request_id} in the original attempt",
        ", ".join(sorted({r.hold for r in refusals})),
    )
    return Handoff(
        bound_requests=(bound,),
        known_effects=tuple(KnownEffect(d, s) for d, s in facts.known_effects),
        unresolved_alternatives=tuple(
            UnresolvedAlternative(subject, CLAIM_ALTERNATIVES)
            for subject in [*unresolved, *facts.uncertain]
        ),
        remaining_obligations=(obligation,),
        permitted_next_actions=_permitted(facts, refusals),
        consumed=facts.consumed,
    )


def check(facts: ActionFacts) -> Outcome:
    """Admissible only when no concern refuses the action in any state the evidence permits."""
    refusals = _refusals(facts)
    handoff = _handoff(facts, refusals)
    if refusals:
        return Unresolved(tuple(refusals), handoff)
    return Admissible(handoff)
