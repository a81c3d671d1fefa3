"""The admission's candidate stands on the operator's read of the same facts (ADR 0066): an
eligible candidate an operator read is what the admission that follows gets, with its deadline
counted again, exactly what evaluating the facts again gives; any fact that moved in between
makes the admission evaluate; a held candidate is never remembered; an admission takes what it
uses. Over the in-memory sources, whose every fact can be moved."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from services.candidate.domain import (
    Candidate,
    CandidateEvaluator,
    ChainVerification,
    EvaluationMemory,
    HoldReason,
    Reconstruction,
    Snapshot,
    gather_facts,
)
from services.candidate.domain.evaluate import evaluated
from services.candidate.domain.journal import chain_verifier
from tests.candidate.memory import (
    POLICY,
    RECONSTRUCTION,
    RUN,
    MemorySources,
    chained,
    held_journal,
    with_finding,
)

READ_AT = datetime(2026, 10, 20, 12, tzinfo=UTC)
# What the admission commit stores: an eligible candidate carries it to the admission.
DERIVED = replace(RECONSTRUCTION, derived_checkpoint=b'{"derived":1}')


@dataclass
class SnapshotSources(MemorySources):
    """The in-memory sources read as one snapshot whose chain is recomputed as it is read, as
    the service's own sources do (a read without that recomputation is never remembered)."""

    def snapshot(self, run_id: str, *, closure_blobs: bool = False) -> Snapshot:
        self.reads["snapshot"] += 1
        entries, head = tuple(self.journal_entries), self._head()
        recomputation = chain_verifier()
        recomputation.add_all(entries)
        return Snapshot(
            self.run_record,
            head,
            entries,
            ChainVerification(True, 0, "", head),
            policy=self.policy_record,
            executions=(),
            blobs=dict(self.blobs) if closure_blobs else {},
            recomputed=recomputation.result(),
        )


class Clock:
    def __init__(self) -> None:
        self.now = READ_AT

    def __call__(self) -> datetime:
        return self.now


def evaluator(
    sources: MemorySources, clock: Clock, memory: EvaluationMemory | None = None
) -> CandidateEvaluator:
    return CandidateEvaluator(sources, clock=clock, qualified=lambda _: True, evaluations=memory)


def evaluated_again(
    sources: SnapshotSources, clock: Clock
) -> tuple[Candidate, Reconstruction | None]:
    """What evaluating the facts as they are now gives, with nothing remembered."""
    return evaluated(gather_facts(sources, RUN.run_id, 1, clock=clock, qualified=lambda _: True))


def test_the_admission_takes_the_candidate_the_operator_read() -> None:
    sources, clock = SnapshotSources(reconstruction=DERIVED), Clock()
    candidates = evaluator(sources, clock)
    read = candidates.invalid_read_continuity(RUN.run_id)
    assert read.eligible and len(candidates.evaluations) == 1

    clock.now += timedelta(seconds=30)
    admitted, inputs = candidates.invalid_read_continuity_for_admission(RUN.run_id)

    assert candidates.evaluations.hits == 1
    assert admitted is read  # no deadline: nothing the clock decides moved
    assert inputs is not None and inputs.derived_checkpoint == DERIVED.derived_checkpoint
    assert (admitted, inputs) == evaluated_again(sources, clock)
    # taken: the next admission of the run evaluates again, with the same answer
    assert len(candidates.evaluations) == 0
    assert candidates.invalid_read_continuity_for_admission(RUN.run_id) == (admitted, inputs)
    assert candidates.evaluations.hits == 1


@settings(max_examples=60, deadline=None)
@given(
    deadline_after=st.integers(min_value=-3_600, max_value=7 * 86_400),
    admitted_after=st.integers(min_value=0, max_value=86_400),
)
def test_the_deadline_is_counted_at_the_admission(deadline_after: int, admitted_after: int) -> None:
    """The one part of an evaluation the clock decides: the handoff's remaining seconds,
    counted at the admission's time whatever the deadline and the wait (0 once passed)."""
    run = replace(RUN, active_deadline=READ_AT + timedelta(seconds=deadline_after))
    sources, clock = SnapshotSources(reconstruction=DERIVED, run_record=run), Clock()
    candidates = evaluator(sources, clock)
    read = candidates.invalid_read_continuity(RUN.run_id)

    clock.now += timedelta(seconds=admitted_after)
    admitted = candidates.invalid_read_continuity_for_admission(RUN.run_id)

    assert candidates.evaluations.hits == 1
    assert admitted == evaluated_again(sources, clock)
    remaining = admitted[0].handoff.consumed.deadline_remaining_seconds
    assert remaining == max(0, deadline_after - admitted_after)
    assert read.handoff.consumed.deadline_remaining_seconds == max(0, deadline_after)


def test_a_fact_that_moved_after_the_read_is_evaluated_again() -> None:
    sources, clock = SnapshotSources(reconstruction=DERIVED), Clock()
    candidates = evaluator(sources, clock)
    assert candidates.invalid_read_continuity(RUN.run_id).eligible

    sources.policy_record = replace(POLICY, revision=2, enabled=False)
    admitted, inputs = candidates.invalid_read_continuity_for_admission(RUN.run_id)

    assert candidates.evaluations.hits == 0
    assert not admitted.eligible and inputs is None
    assert HoldReason.POLICY_DISABLED in {hold.reason for hold in admitted.holds}
    assert admitted.policy_revision == 2
    assert (admitted, inputs) == evaluated_again(sources, clock)


def test_an_entry_appended_after_the_read_is_evaluated_again() -> None:
    sources, clock = SnapshotSources(reconstruction=DERIVED), Clock()
    candidates = evaluator(sources, clock)
    assert candidates.invalid_read_continuity(RUN.run_id).eligible

    annotation = ("startup_recovery_annotation", {"annotation": "after the read"})
    sources.journal_entries = chained([*held_journal(), annotation])
    admitted, inputs = candidates.invalid_read_continuity_for_admission(RUN.run_id)

    assert candidates.evaluations.hits == 0
    assert not admitted.eligible and inputs is None
    assert admitted.journal_head.sequence == len(sources.journal_entries)
    assert (admitted, inputs) == evaluated_again(sources, clock)


def test_a_reconstruction_that_changed_is_evaluated_again() -> None:
    sources, clock = SnapshotSources(reconstruction=DERIVED), Clock()
    candidates = evaluator(sources, clock)
    read = candidates.invalid_read_continuity(RUN.run_id)

    sources.reconstruction = replace(DERIVED, witness_digest="sha256:" + "3" * 64)
    admitted, _ = candidates.invalid_read_continuity_for_admission(RUN.run_id)

    assert candidates.evaluations.hits == 0
    assert admitted.proof.witness_digest != read.proof.witness_digest
    assert admitted.digests.candidate_digest != read.digests.candidate_digest


def test_a_held_candidate_is_not_remembered() -> None:
    sources = SnapshotSources(reconstruction=DERIVED, analysis=with_finding("EVIDENCE_QUERY_VALID"))
    candidates = evaluator(sources, Clock())
    assert not candidates.invalid_read_continuity(RUN.run_id).eligible
    assert len(candidates.evaluations) == 0


def test_a_candidate_without_admission_inputs_is_not_remembered() -> None:
    """Without the derived checkpoint bytes the admission has nothing to commit from the read."""
    candidates = evaluator(SnapshotSources(reconstruction=RECONSTRUCTION), Clock())
    assert candidates.invalid_read_continuity(RUN.run_id).eligible
    assert len(candidates.evaluations) == 0


def test_a_read_whose_chain_was_not_recomputed_is_not_remembered() -> None:
    """Sources that read run, journal and verification apart (no recomputation as they arrive):
    the head alone would not fix the entries, so nothing is remembered."""
    candidates = evaluator(MemorySources(reconstruction=DERIVED), Clock())
    assert candidates.invalid_read_continuity(RUN.run_id).eligible
    assert len(candidates.evaluations) == 0


def test_a_held_read_forgets_the_eligible_one_before_it() -> None:
    sources, clock = SnapshotSources(reconstruction=DERIVED), Clock()
    candidates = evaluator(sources, clock)
    candidates.invalid_read_continuity(RUN.run_id)
    sources.policy_record = replace(POLICY, revision=2, enabled=False)
    candidates.invalid_read_continuity(RUN.run_id)
    assert len(candidates.evaluations) == 0


def test_the_memory_is_bounded_by_runs() -> None:
    memory = EvaluationMemory(max_runs=2)
    clock = Clock()
    for run_id in ("run-a", "run-b", "run-c"):
        sources = SnapshotSources(reconstruction=DERIVED, run_record=replace(RUN, run_id=run_id))
        evaluator(sources, clock, memory).invalid_read_continuity(run_id)
    assert len(memory) == 2
    first = SnapshotSources(reconstruction=DERIVED, run_record=replace(RUN, run_id="run-a"))
    evaluator(first, clock, memory).invalid_read_continuity_for_admission("run-a")
    assert memory.hits == 0  # the oldest went first
    third = SnapshotSources(reconstruction=DERIVED, run_record=replace(RUN, run_id="run-c"))
    evaluator(third, clock, memory).invalid_read_continuity_for_admission("run-c")
    assert memory.hits == 1
