"""The spec model against ledger replicas as processes, with faults between its steps (ADR 0058;
docs/reliability.md, "Faults between steps"). ``make test`` runs a small derandomized budget;
``make model-check`` and ``make reliability`` the full one (FORGE_MODEL_FAULT_EXAMPLES,
FORGE_MODEL_STEPS)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.conftest import postgres_schema
from tests.model.fault_harness import FaultStack, fault_stack
from tests.model.faults import FaultMachine
from tests.model.spec_model import COMPLETED
from tests.reliability.faketime import faketime_environment

EXPLORING = "FORGE_MODEL_EXAMPLES" in os.environ
#: make test's budget: each kill restarts a Python process (about two seconds).
SMALL_EXAMPLES, SMALL_STEPS = 8, 25


def budget() -> tuple[int, int]:
    if not EXPLORING:
        return SMALL_EXAMPLES, SMALL_STEPS
    examples = os.environ.get("FORGE_MODEL_FAULT_EXAMPLES", os.environ["FORGE_MODEL_EXAMPLES"])
    return int(examples), int(os.environ.get("FORGE_MODEL_STEPS", "40"))


#: Replica A's wall clock offset under libfaketime ("+1h", "-20m"; "none": the host's clock).
#: An hour ahead by default, so every run also shows leases measured on the database's clock
#: (ADR 0057): on its own clock replica A would expire every lease B grants.
SKEW = os.environ.get("FORGE_MODEL_SKEW", "+1h").replace("none", "")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultStack]:
    skewed = faketime_environment(SKEW) if SKEW else None
    with (
        postgres_schema() as database_url,
        fault_stack(
            database_url, tmp_path_factory.mktemp("model-faults"), skewed_replica=skewed
        ) as running,
    ):
        yield running


def test_the_services_answer_as_the_spec_requires_through_faults(
    stack: FaultStack, tmp_path: Path
) -> None:
    examples, steps = budget()
    FaultMachine.stack = stack
    FaultMachine.history_dir = tmp_path
    FaultMachine.examples = FaultMachine.total_steps = FaultMachine.checked_histories = 0
    FaultMachine.outcomes.clear()
    FaultMachine.faults.clear()
    run_state_machine_as_test(
        FaultMachine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
            derandomize=not EXPLORING,
        ),
    )
    injected = {k: v for k, v in FaultMachine.faults.items() if k.startswith("fault: ")}
    assert FaultMachine.checked_histories > 0
    assert sum(injected.values()) > 0
    target = f"{stack.target}, replica A {SKEW}" if SKEW else stack.target
    print(
        f"\nmodel ({target}): {FaultMachine.examples} sequences, "
        f"{FaultMachine.total_steps} checked calls, {sum(injected.values())} faults injected, "
        f"{FaultMachine.faults.get('info outcomes', 0)} info outcomes, "
        f"{FaultMachine.checked_histories} histories checked, 0 divergences, 0 anomalies"
    )
    cuts = stack.proxy.cuts
    print(f"  connections cut: {cuts['before_commit']} before COMMIT, {cuts['after_commit']} after")
    for what, count in sorted(FaultMachine.faults.items()):
        print(f"  {count:6d}  {what}")
    for outcome, count in sorted(FaultMachine.outcomes.items()):
        print(f"  {count:6d}  {outcome}")


class Scripted:
    """Stands in for Hypothesis's data object: answers each draw from a script, in order."""

    def __init__(self, *values: object) -> None:
        self.values = list(values)

    def draw(self, strategy: object, label: str = "") -> object:
        return self.values.pop(0)


def test_a_lost_claim_of_a_claimed_request_settles_as_refused(
    stack: FaultStack, tmp_path: Path
) -> None:
    """Found by the full run: the first fault machine settled a lost claim by reading the request
    back, and took "claimed" as the claim's success although the request was claimed before it
    (the same for a lost completion of a completed request). A read back shows a write applied
    only when it shows the change the write makes; here the retry is refused as the spec says."""
    FaultMachine.stack, FaultMachine.history_dir = stack, tmp_path
    FaultMachine.faults.clear()
    machine = FaultMachine()
    machine.start()
    run_id = str(machine.seed_run())
    machine.admit(run_id)
    machine.claim(Scripted(run_id))  # type: ignore[arg-type]
    # replica A is killed before each call reaches it: the answer is lost, the retry refused
    machine.kill_replica(Scripted(False, "claim", run_id), replica=0, delay=0.0)  # type: ignore[arg-type]
    assert machine.model.runs[run_id].generation == 1
    machine.finish(Scripted(run_id), COMPLETED)  # type: ignore[arg-type]
    machine.kill_replica(Scripted(False, "complete", run_id), replica=0, delay=0.0)  # type: ignore[arg-type]
    assert machine.model.runs[run_id].state == COMPLETED
    assert FaultMachine.faults.get("info outcomes", 0) >= 2
    machine.requests_are_in_the_modelled_state()
    machine.one_ticket_per_run_and_the_pending_count()
    machine.every_journal_verifies()
    machine.teardown()


def test_a_retry_decision_cut_after_its_commit_settles_by_its_reconciliation_id(
    stack: FaultStack, tmp_path: Path
) -> None:
    """A reconciliation's decision to retry, its connection cut after COMMIT: the answer is lost
    though both its journal lines (the settlement and the new request's queued line) are
    written. The same reconciliation id sent again replays the stored decision (created=false),
    and the history checker explains both lines by the lost operation."""
    FaultMachine.stack, FaultMachine.history_dir = stack, tmp_path
    FaultMachine.faults.clear()
    machine = FaultMachine()
    machine.start()
    run_id = str(machine.seed_run())
    machine.admit(run_id)
    machine.claim(Scripted(run_id))  # type: ignore[arg-type]
    cuts = stack.proxy.cuts["after_commit"]
    # steered, the decision, its run, then the decision variant: retry on verified evidence
    script = Scripted(True, "reconcile", run_id, (True, "stopped", False))
    machine.cut_connection(script, mode="after_commit")  # type: ignore[arg-type]
    assert stack.proxy.cuts["after_commit"] == cuts + 1
    assert FaultMachine.faults.get("settled by retry: reconcile") == 1
    run = machine.model.runs[run_id]
    assert run.state == "queued" and run.execution_request_id != run.ticket_request_id
    machine.requests_are_in_the_modelled_state()
    machine.every_journal_verifies()
    machine.teardown()  # the checker's verdict on the history: no anomaly
