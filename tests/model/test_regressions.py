"""Sequences the model found, kept as regression tests: each runs through the same machine, with
the same checks, as a Hypothesis sequence would (docs/reliability.md, "The model and the history
checker")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.model.harness import ModelStack, sqlite_stack
from tests.model.machine import ModelMachine
from tests.model.recovery_model import ORIGINAL_OPERATOR
from tests.model.spec_model import COMPLETED, QUEUED


@pytest.fixture(scope="module")
def model_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelStack]:
    with sqlite_stack(tmp_path_factory.mktemp("model-regressions")) as stack:
        yield stack


class Draws:
    """Stands in for Hypothesis's data object: draws the first of the choices."""

    def draw(self, strategy: object) -> object:
        return strategy.elements[0]  # type: ignore[attr-defined]


class Script:
    """Stands in for Hypothesis's data object: draws the given values in turn."""

    def __init__(self, *values: object) -> None:
        self.values = list(values)

    def draw(self, strategy: object) -> object:
        return self.values.pop(0)


def check_invariants(machine: ModelMachine) -> None:
    machine.requests_are_in_the_modelled_state()
    machine.one_ticket_per_run_and_the_pending_count()
    machine.every_journal_verifies()


def _refused_then_observed(machine: ModelMachine) -> str:
    """A run admitted, its first provider request refused and recovered, the same request
    consumed with its evidence read unknown and recovered by observation (each recovery first
    submitted unacknowledged, then as reviewed); its id."""
    run_id = str(machine.seed_run())
    machine.admit(run_id)
    machine.native_turn(Draws())  # type: ignore[arg-type]
    machine.recover_refusal(Draws())  # type: ignore[arg-type]  # unacknowledged
    machine.recover_refusal(Draws())  # type: ignore[arg-type]  # as reviewed
    run = machine.model.runs[run_id]
    assert (run.state, run.generation) == (QUEUED, 1)
    check_invariants(machine)
    machine.native_turn(Draws())  # type: ignore[arg-type]
    machine.recover_observation(Draws())  # type: ignore[arg-type]  # unacknowledged
    machine.recover_observation(Draws())  # type: ignore[arg-type]  # as reviewed
    assert (run.state, run.generation) == (QUEUED, 2)
    check_invariants(machine)
    return run_id


def test_a_claim_keeps_the_lease_admission_granted(model_stack: ModelStack, tmp_path: Path) -> None:
    """Found by the full run: the first model renewed the lease at the claim. The services keep
    the one finite lease admission granted (admitted at t, claimed at t+600: the completion at
    t+1000 is refused LEASE_EXPIRED, not allowed)."""
    ModelMachine.stack, ModelMachine.history_dir = model_stack, tmp_path
    machine = ModelMachine()
    machine.start()
    run_id = str(machine.seed_run())
    machine.admit(run_id)
    machine.advance(300)
    machine.advance(300)
    machine.claim(Draws())  # type: ignore[arg-type]
    check_invariants(machine)
    machine.advance(300)
    machine.advance(120)
    machine.finish(Draws(), COMPLETED)  # type: ignore[arg-type]
    assert machine.model.runs[run_id].state == "claimed"
    check_invariants(machine)
    machine.teardown()


def test_an_expired_never_claimed_request_keeps_its_recovery(
    model_stack: ModelStack, tmp_path: Path
) -> None:
    """Found by the first runs of the recovery rules: the model held the recovery of a request
    that a sweep expired unclaimed. The services recover it, as ADR 0014 decides: the history
    reads the expiry at generation 0 before any claim as the unclaimed end, like a failure."""
    ModelMachine.stack, ModelMachine.history_dir = model_stack, tmp_path
    machine = ModelMachine()
    machine.start()
    run_id = str(machine.seed_run())
    machine.admit(run_id)
    machine.advance(1000)
    machine.expire_sweep()
    machine.steps = 0  # the original operator, as reviewed
    machine.recover(Script(run_id))  # type: ignore[arg-type]
    assert machine.model.runs[run_id].state == QUEUED
    check_invariants(machine)
    machine.teardown()


def test_a_replayed_admission_names_the_ticket_after_a_reconciled_retry(
    model_stack: ModelStack, tmp_path: Path
) -> None:
    """Found by the first runs of the reconciliation rule: the model expected a replayed
    admission to answer the retry's request. The ticket stays the one admission wrote, naming
    the request it queued (now reconciled); the retry is another request under that ticket."""
    ModelMachine.stack, ModelMachine.history_dir = model_stack, tmp_path
    machine = ModelMachine()
    machine.start()
    run_id = str(machine.seed_run())
    machine.admit(run_id)
    machine.claim(Draws())  # type: ignore[arg-type]
    machine.reconcile(Script(run_id), True, "stopped", False)  # type: ignore[arg-type]
    run = machine.model.runs[run_id]
    assert run.execution_request_id != run.ticket_request_id
    assert machine.recoveries.of(run).reconciled.keys() == {run.ticket_request_id}
    machine.replay_admission(Draws())  # type: ignore[arg-type]
    machine.late_write_after_retry(Script(run_id, run.ticket_request_id), True)  # type: ignore[arg-type]
    check_invariants(machine)
    machine.teardown()


def test_a_reconciliation_reviewed_queued_meets_the_sweep_first(
    model_stack: ModelStack, tmp_path: Path
) -> None:
    """Found by the reconciliation rule: the model expected a refused decision to write nothing.
    The decision's commit first expires what is due, and a refusal leaves that sweep standing
    (the ledger expires it again in a transaction of its own, ADR 0014); a request the reviewer
    saw queued is now expired: RECONCILIATION_STATE_CHANGED, with its expiry journaled."""
    ModelMachine.stack, ModelMachine.history_dir = model_stack, tmp_path
    machine = ModelMachine()
    machine.start()
    run_id = str(machine.seed_run())
    machine.admit(run_id)
    machine.advance(1000)
    machine.reconcile(Script(run_id), False, "", True)  # type: ignore[arg-type]
    assert machine.model.runs[run_id].state == "expired"
    assert machine.outcomes["reconcile_mark FAILED_PRECONDITION RECONCILIATION_STATE_CHANGED"]
    check_invariants(machine)
    machine.teardown()


def test_a_retried_request_id_has_no_never_claimed_recovery(
    model_stack: ModelStack, tmp_path: Path
) -> None:
    """Found by the first runs of the recovery rules: the model let a reconciliation's retry that
    failed before its own claim be recovered as never claimed. Spec 000 asks the request id's
    complete native history to prove no worker ever claimed it; the reconciled request's claim is
    in that history, so the candidate is held and the submission refused CANDIDATE_HELD."""
    ModelMachine.stack, ModelMachine.history_dir = model_stack, tmp_path
    machine = ModelMachine()
    machine.start()
    run_id = str(machine.seed_run())
    machine.admit(run_id)
    machine.claim(Draws())  # type: ignore[arg-type]
    machine.reconcile(Script(run_id), True, "stopped", False)  # type: ignore[arg-type]
    machine.fail_unclaimed(Script(run_id))  # type: ignore[arg-type]
    assert machine.model.runs[run_id].state == "failed"
    machine.steps = 0  # the original operator, as reviewed
    machine.recover(Script(run_id))  # type: ignore[arg-type]
    assert machine.outcomes["recover FAILED_PRECONDITION CANDIDATE_HELD"]
    check_invariants(machine)
    machine.teardown()


def test_a_refusal_after_a_never_claimed_recovery(model_stack: ModelStack, tmp_path: Path) -> None:
    """Found by the first runs of the provider-refusal rules: a request failed before a claim,
    was recovered, then claimed and its first provider request refused. The model held the
    refusal eligible; the services hold it (REFUSAL_NOT_PROVEN): the spec's supported case is
    the first request with nothing between the ticket and the claim, and the never-claimed
    failure, its witness and requeue are not part of a refusal before admission. A model bug:
    the refusal is predicted held, CANDIDATE_HELD, nothing written."""
    ModelMachine.stack, ModelMachine.history_dir = model_stack, tmp_path
    machine = ModelMachine()
    machine.start()
    run_id = str(machine.seed_run())
    machine.admit(run_id)
    machine.steps = 0
    machine.fail_unclaimed(Draws())  # type: ignore[arg-type]
    machine.steps = 0  # the original operator, as reviewed
    machine.recover(Draws())  # type: ignore[arg-type]
    assert machine.model.runs[run_id].state == QUEUED
    machine.native_turn(Draws())  # type: ignore[arg-type]
    check_invariants(machine)
    machine.recover_refusal(Draws())  # type: ignore[arg-type]  # unacknowledged
    machine.recover_refusal(Draws())  # type: ignore[arg-type]  # as reviewed
    assert machine.outcomes["recover_refusal FAILED_PRECONDITION CANDIDATE_HELD"] >= 1
    check_invariants(machine)
    machine.teardown()


def test_a_refusal_and_then_an_observation_recovered_once_each(
    model_stack: ModelStack, tmp_path: Path
) -> None:
    """The two native recoveries' success paths, as the exploratory runs draw them: the first
    request refused by the provider and recovered, the same request consumed with its evidence
    read unknown and recovered by observation, each replayed; a second refusal stays held."""
    ModelMachine.stack, ModelMachine.history_dir = model_stack, tmp_path
    machine = ModelMachine()
    machine.start()
    run_id = _refused_then_observed(machine)
    machine.replay_native_recovery(Script((run_id, "readonly_observation")), True)  # type: ignore[arg-type]
    machine.replay_native_recovery(Script((run_id, "rejected_boundary")), False)  # type: ignore[arg-type]
    machine.recover_refusal(Draws())  # type: ignore[arg-type]  # another administrator
    for outcome in (
        "recover_refusal OK",
        "recover_observation OK",
        "replay_recover_observation OK",
        "replay_recover_refusal ALREADY_EXISTS RECOVERY_ID_OWNED_BY_ANOTHER_IDENTITY",
        "recover_observation INVALID_ARGUMENT ACKNOWLEDGEMENT_REQUIRED",
        "recover_refusal ALREADY_EXISTS RECOVERY_ALREADY_SPENT",
    ):
        assert machine.outcomes.get(outcome), (outcome, machine.outcomes)
    check_invariants(machine)
    machine.teardown()


def test_no_reconciliation_retry_after_a_turn_with_an_unknown_read(
    model_stack: ModelStack, tmp_path: Path
) -> None:
    """Found by the full run on the merged rules: after the observation recovery, a new claim of
    the request was reconciled with a verified retry. The model predicted the retry; the services
    hold it (RECONCILIATION_UNRESOLVED, UNRESOLVED_CUSTODY): the consumed turn's evidence read has
    an unknown, durable outcome, which keeps its native reconciliation rules (spec 000), so only
    a mark is left."""
    ModelMachine.stack, ModelMachine.history_dir = model_stack, tmp_path
    machine = ModelMachine()
    machine.start()
    run_id = _refused_then_observed(machine)
    machine.claim(Draws())  # type: ignore[arg-type]
    check_invariants(machine)
    machine.reconcile(Script(run_id), True, "stopped", False)  # type: ignore[arg-type]
    assert machine.outcomes.get("reconcile_retry FAILED_PRECONDITION RECONCILIATION_UNRESOLVED")
    check_invariants(machine)
    machine.teardown()


def test_a_recovery_counts_the_cap_after_its_sweep(model_stack: ModelStack, tmp_path: Path) -> None:
    """Found by the full run on SQLite: with the pending cap at 1 held by a queued request whose
    lease had run out, the model refused a never-claimed recovery PENDING_TICKET_LIMIT; the
    commit sweeps that request expired before its cap check, so the services accept."""
    ModelMachine.stack, ModelMachine.history_dir = model_stack, tmp_path
    machine = ModelMachine()
    machine.start()
    queued, failed = str(machine.seed_run()), str(machine.seed_run())
    machine.admit(failed)
    machine.fail_unclaimed(Script(failed))  # type: ignore[arg-type]
    machine.admit(queued)
    machine.put_policy(True, 1)
    machine.advance(1000)  # the queued request's 900 s lease ran out; no sweep yet
    check_invariants(machine)
    machine.submit_recovery(Script(failed), ORIGINAL_OPERATOR, "as reviewed")  # type: ignore[arg-type]
    assert machine.outcomes.get("recover OK")
    check_invariants(machine)
    machine.teardown()
