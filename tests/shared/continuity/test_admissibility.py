"""The admissibility check's invariants, over generated facts (ADR 0009)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from shared.continuity.admissibility import check
from shared.continuity.admissibility_facts import (
    ActionFacts,
    Admissible,
    BoundRequest,
    Concern,
    Consumed,
    Unresolved,
)

STATES = ("queued", "claimed", "completed", "failed")

bound_requests = st.builds(
    BoundRequest,
    request_id=st.just("req-1"),
    execution_request_id=st.just("exr_1"),
    state=st.sampled_from(STATES),
    claimed=st.booleans(),
    failed_unclaimed=st.booleans(),
    lease_expired=st.booleans(),
)

facts_strategy = st.builds(
    ActionFacts,
    workflow=st.just("never_claimed"),
    action=st.just("request_invalid_read_recovery"),
    bound=bound_requests,
    spent_by=st.lists(st.sampled_from(["rec-a", "rec-b"]), max_size=1).map(tuple),
    workflow_enabled=st.booleans(),
    actor=st.sampled_from(["ada", "bob"]),
    original_actor=st.just("ada"),
    actor_has_authority=st.booleans(),
    outstanding=st.lists(st.just("exr_2"), max_size=1).map(tuple),
    unaccounted_sequences=st.lists(st.integers(1, 50), max_size=2).map(tuple),
    uncertain=st.lists(st.sampled_from(["call-1", "call-2"]), max_size=1).map(tuple),
    consumed=st.builds(
        Consumed,
        commands_used=st.integers(0, 22),
        command_limit=st.just(22),
        deadline_remaining_seconds=st.integers(-1, 7200),
    ),
)


def _after_waiting(facts: ActionFacts, elapsed: int) -> ActionFacts:
    """The same evidence, later: leases may have expired and the deadline came closer."""
    remaining = facts.consumed.deadline_remaining_seconds
    return replace(
        facts,
        bound=replace(facts.bound, lease_expired=True),
        consumed=replace(
            facts.consumed,
            deadline_remaining_seconds=-1 if remaining < 0 else max(0, remaining - elapsed),
        ),
    )


@given(facts_strategy, st.integers(1, 10**6))
def test_waiting_never_turns_unresolved_into_admissible(facts: ActionFacts, elapsed: int) -> None:
    if isinstance(check(facts), Unresolved):
        assert isinstance(check(_after_waiting(facts, elapsed)), Unresolved)


@given(facts_strategy, st.integers(1, 10**6))
def test_the_outcome_does_not_depend_on_time(facts: ActionFacts, elapsed: int) -> None:
    assert type(check(facts)) is type(check(_after_waiting(facts, elapsed)))


@given(facts_strategy)
def test_a_claimed_or_uncertain_request_always_refuses(facts: ActionFacts) -> None:
    claimed = replace(facts, bound=replace(facts.bound, claimed=True))
    in_claim = replace(facts, bound=replace(facts.bound, state="claimed"))
    uncertain = replace(facts, uncertain=(*facts.uncertain, "call-9"))
    for variant in (claimed, in_claim, uncertain):
        outcome = check(variant)
        assert isinstance(outcome, Unresolved)
        assert any(r.concern is Concern.RESIDUAL_EFFECT for r in outcome.refusals)
        assert outcome.handoff.unresolved_alternatives
        assert all(a.action != variant.action for a in outcome.handoff.permitted_next_actions)


@given(facts_strategy)
def test_admissible_only_for_a_proven_unclaimed_failure_by_the_original_actor(
    facts: ActionFacts,
) -> None:
    if isinstance(check(facts), Admissible):
        assert facts.bound.state == "failed" and facts.bound.failed_unclaimed
        assert not facts.bound.claimed and not facts.uncertain and not facts.outstanding
        assert facts.actor == facts.original_actor and facts.actor_has_authority
        assert facts.workflow_enabled and not facts.spent_by


def test_the_eligible_case_is_admissible_and_permits_the_action() -> None:
    facts = ActionFacts(
        workflow="never_claimed",
        action="request_invalid_read_recovery",
        bound=BoundRequest("req-1", "exr_1", "failed", claimed=False, failed_unclaimed=True),
        spent_by=(),
        workflow_enabled=True,
        actor="ada",
        original_actor="ada",
        actor_has_authority=True,
    )
    outcome = check(facts)
    assert isinstance(outcome, Admissible)
    assert [a.action for a in outcome.handoff.permitted_next_actions] == [
        "request_invalid_read_recovery"
    ]
    spent = check(replace(facts, spent_by=("rec-a",)))
    assert isinstance(spent, Unresolved)
    assert [r.hold for r in spent.refusals] == ["RECOVERY_SPENT"]
    assert [a.action for a in spent.handoff.permitted_next_actions] == ["read_recovery"]
