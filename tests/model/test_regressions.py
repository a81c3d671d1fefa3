"""Sequences the model found, kept as regression tests: each runs through the same machine, with
the same checks, as a Hypothesis sequence would (docs/reliability.md, "The model and the history
checker")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.model.harness import ModelStack, sqlite_stack
from tests.model.machine import ModelMachine
from tests.model.spec_model import COMPLETED


@pytest.fixture(scope="module")
def model_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelStack]:
    with sqlite_stack(tmp_path_factory.mktemp("model-regressions")) as stack:
        yield stack


class Draws:
    """Stands in for Hypothesis's data object: draws the first of the choices."""

    def draw(self, strategy: object) -> object:
        return strategy.elements[0]  # type: ignore[attr-defined]


def check_invariants(machine: ModelMachine) -> None:
    machine.requests_are_in_the_modelled_state()
    machine.one_ticket_per_run_and_the_pending_count()
    machine.every_journal_verifies()


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
