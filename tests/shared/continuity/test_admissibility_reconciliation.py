"""The admissibility check's reconciliation facts (ADR 0010), over generated facts."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from shared.continuity.admissibility import check
from shared.continuity.admissibility_facts import (
    MARK_UNRESOLVED,
    RETRY_STAGE,
    ActionFacts,
    Admissible,
    BoundRequest,
    Consumed,
    ReconciliationFacts,
    Unresolved,
    UnresolvedAlternative,
)

PROBLEMS = ("no verification is recorded for this reconciliation",)

facts_strategy = st.builds(
    ActionFacts,
    workflow=st.just("reconciliation"),
    action=st.sampled_from([RETRY_STAGE, MARK_UNRESOLVED]),
    bound=st.builds(
        BoundRequest,
        request_id=st.just("req-1"),
        execution_request_id=st.just("exr_1"),
        state=st.sampled_from(("queued", "claimed", "completed", "failed", "reconciled")),
        claimed=st.booleans(),
        failed_unclaimed=st.just(False),
        lease_expired=st.booleans(),
        cessation_verified=st.booleans(),
    ),
    spent_by=st.lists(st.just("rcn-0"), max_size=1).map(tuple),
    workflow_enabled=st.booleans(),
    actor=st.just("alice"),
    original_actor=st.just("alice"),
    actor_has_authority=st.booleans(),
    outstanding=st.lists(st.just("exr_2"), max_size=1).map(tuple),
    unaccounted_sequences=st.lists(st.integers(1, 50), max_size=1).map(tuple),
    uncertain=st.lists(st.just("call-1"), max_size=1).map(tuple),
    consumed=st.builds(Consumed, commands_used=st.integers(0, 22), command_limit=st.just(22)),
    reconciliation=st.builds(
        ReconciliationFacts,
        decision=st.sampled_from([RETRY_STAGE, MARK_UNRESOLVED]),
        verification_problems=st.sampled_from([(), PROBLEMS]),
        budget_problems=st.sampled_from([(), ("the command budget is exhausted (22 of 22)",)]),
        cessation_unproven_acknowledged=st.booleans(),
    ),
)


@given(facts_strategy)
def test_a_retry_is_admissible_only_with_every_concern_cleared(facts: ActionFacts) -> None:
    assert facts.reconciliation is not None
    facts = replace(facts, reconciliation=replace(facts.reconciliation, decision=RETRY_STAGE))
    outcome = check(facts)
    cleared = (
        facts.bound.state == "claimed"
        and facts.bound.cessation_verified
        and not facts.spent_by
        and facts.actor_has_authority
        and facts.workflow_enabled
        and not facts.outstanding
        and not facts.unaccounted_sequences
        and not facts.uncertain
        and not facts.reconciliation.budget_problems  # type: ignore[union-attr]
    )
    assert isinstance(outcome, Admissible) == cleared


@given(facts_strategy)
def test_mark_unresolved_needs_identity_authority_a_claim_and_cessation_verified_or_acknowledged(
    facts: ActionFacts,
) -> None:
    assert facts.reconciliation is not None
    marking = replace(facts.reconciliation, decision=MARK_UNRESOLVED)
    acknowledged = marking.cessation_unproven_acknowledged
    facts = replace(facts, workflow_enabled=True, reconciliation=marking)
    outcome = check(facts)
    cleared = (
        facts.bound.state == "claimed"
        and not facts.spent_by
        and facts.actor_has_authority
        # 002: the claim is released only after verified cessation, or on the record that it
        # is unproven (ADR 0045)
        and (facts.bound.cessation_verified or acknowledged)
    )
    assert isinstance(outcome, Admissible) == cleared
    if not facts.bound.cessation_verified and not acknowledged:
        refused = {r.hold for r in outcome.refusals} if isinstance(outcome, Unresolved) else set()
        assert facts.bound.state != "claimed" or "RECONCILIATION_NOT_VERIFIED" in refused
    if cleared and not facts.bound.cessation_verified:
        # the terminal unresolved state names every alternative the evidence still permits
        assert UnresolvedAlternative("exr_1", ("failed", "committed", "in_flight")) in (
            outcome.handoff.unresolved_alternatives
        )


@given(facts_strategy)
def test_a_missing_verification_always_refuses_a_retry(facts: ActionFacts) -> None:
    facts = replace(
        facts,
        bound=replace(facts.bound, cessation_verified=False),
        reconciliation=ReconciliationFacts(RETRY_STAGE, PROBLEMS),
    )
    outcome = check(facts)
    assert isinstance(outcome, Unresolved)
    assert "RECONCILIATION_NOT_VERIFIED" in {r.hold for r in outcome.refusals}


@given(facts_strategy)
def test_mark_unresolved_is_offered_exactly_when_it_would_be_admitted(facts: ActionFacts) -> None:
    assert facts.reconciliation is not None
    retry = replace(facts, reconciliation=replace(facts.reconciliation, decision=RETRY_STAGE))
    # offered with its condition: without verified cessation, on the acknowledgement
    mark = replace(
        facts,
        workflow_enabled=True,
        reconciliation=replace(
            facts.reconciliation, decision=MARK_UNRESOLVED, cessation_unproven_acknowledged=True
        ),
    )
    offered = {a.action for a in check(retry).handoff.permitted_next_actions}
    if isinstance(check(mark), Admissible):
        assert offered & {RETRY_STAGE, MARK_UNRESOLVED}
    else:
        assert MARK_UNRESOLVED not in offered


@given(facts_strategy)
def test_a_decided_request_is_blocked_by_its_decision_not_called_unclaimed(
    facts: ActionFacts,
) -> None:
    """After a decision the request is reconciled or unresolved, and it was claimed: what blocks
    it is the spent decision; "not claimed" would misstate its history (issue 47)."""
    assert facts.reconciliation is not None
    for state in ("reconciled", "unresolved"):
        decided = replace(facts, bound=replace(facts.bound, state=state), spent_by=("rcn-0",))
        outcome = check(decided)
        assert isinstance(outcome, Unresolved)
        holds = {r.hold for r in outcome.refusals}
        assert "RECOVERY_SPENT" in holds and "REQUEST_NOT_CLAIMED" not in holds
        (obligation,) = outcome.handoff.remaining_obligations
        assert "REQUEST_NOT_CLAIMED" not in obligation.blocked_by
    # a request no decision reconciled is still "not claimed" when it is not
    queued = replace(facts, bound=replace(facts.bound, state="queued"))
    assert "REQUEST_NOT_CLAIMED" in {r.hold for r in check(queued).refusals}  # type: ignore[union-attr]
