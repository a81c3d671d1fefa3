"""The spec model against the real services on SQLite, for a budget of examples and steps
(docs/reliability.md, "The model"). ``make test`` runs a small budget; ``make model-check`` and
``make reliability`` the full one (FORGE_MODEL_EXAMPLES, FORGE_MODEL_STEPS)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.conftest import postgres_schema
from tests.model.harness import ModelStack, postgres_stack, sqlite_stack
from tests.model.machine import ModelMachine
from tests.scale.pgbouncer import running_pgbouncer

#: The budget; unset (make test), the small one runs the same sequences every time, so a CI run
#: is reproducible, while make model-check draws new ones.
EXPLORING = "FORGE_MODEL_EXAMPLES" in os.environ
#: make test's budget per target: PostgreSQL's calls take about four times SQLite's.
SMALL_BUDGET = {"sqlite": 32, "postgresql+pgbouncer": 8}
STEPS = int(os.environ.get("FORGE_MODEL_STEPS", "40"))


def examples(target: str) -> int:
    return int(os.environ.get("FORGE_MODEL_EXAMPLES", SMALL_BUDGET[target]))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def model_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ModelStack]:
    """SQLite with one ledger; PostgreSQL with two replicas, one behind PgBouncer."""
    if request.param == "sqlite":
        with sqlite_stack(tmp_path_factory.mktemp("model")) as stack:
            yield stack
        return
    with (
        postgres_schema() as database_url,
        running_pgbouncer(database_url, tmp_path_factory.mktemp("pgbouncer")) as bouncer,
        postgres_stack(database_url, bouncer.url) as stack,
    ):
        yield stack


def test_the_services_answer_as_the_spec_model_requires(
    model_stack: ModelStack, tmp_path: Path
) -> None:
    ModelMachine.stack = model_stack
    ModelMachine.history_dir = tmp_path
    ModelMachine.examples = ModelMachine.total_steps = ModelMachine.checked_histories = 0
    ModelMachine.outcomes.clear()
    run_state_machine_as_test(
        ModelMachine,
        settings=settings(
            max_examples=examples(model_stack.target),
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
            derandomize=not EXPLORING,
        ),
    )
    assert ModelMachine.examples >= examples(model_stack.target)
    assert ModelMachine.checked_histories > 0
    print(
        f"\nmodel ({model_stack.target}): {ModelMachine.examples} sequences, "
        f"{ModelMachine.total_steps} checked calls, {ModelMachine.checked_histories} histories "
        "checked, 0 divergences, 0 anomalies"
    )
    for outcome, count in sorted(ModelMachine.outcomes.items()):
        print(f"  {count:6d}  {outcome}")
