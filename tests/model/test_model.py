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

from tests.model.harness import ModelStack, sqlite_stack
from tests.model.machine import ModelMachine

#: The budget; unset (make test), the small one runs the same sequences every time, so a CI run
#: is reproducible, while make model-check draws new ones.
EXPLORING = "FORGE_MODEL_EXAMPLES" in os.environ
EXAMPLES = int(os.environ.get("FORGE_MODEL_EXAMPLES", "25"))
STEPS = int(os.environ.get("FORGE_MODEL_STEPS", "40"))


@pytest.fixture(scope="module")
def model_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelStack]:
    with sqlite_stack(tmp_path_factory.mktemp("model")) as stack:
        yield stack


def test_the_services_answer_as_the_spec_model_requires(
    model_stack: ModelStack, tmp_path: Path
) -> None:
    ModelMachine.stack = model_stack
    ModelMachine.history_dir = tmp_path
    run_state_machine_as_test(
        ModelMachine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
            derandomize=not EXPLORING,
        ),
    )
    assert ModelMachine.examples >= EXAMPLES
    assert ModelMachine.checked_histories > 0
    print(
        f"\nmodel: {ModelMachine.examples} sequences, {ModelMachine.total_steps} checked calls, "
        f"{ModelMachine.checked_histories} histories checked, 0 divergences, 0 anomalies"
    )
    for outcome, count in sorted(ModelMachine.outcomes.items()):
        print(f"  {count:6d}  {outcome}")
