"""What one admission costs at each hop, counted (issue 50 §2; tests/admission/hop_counting.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from services.demo.seed import load_fixture, seed_held_run
from tests.admission.conftest import Stack, submission
from tests.admission.hop_counting import KINDS, counting, profiled_threads

FIXTURE = load_fixture("v1_basic")


@pytest.fixture
def profiled() -> Iterator[None]:
    with profiled_threads():
        yield


def test_one_admission_counted_hop_by_hop(profiled: None, stack: Stack, engine: Engine) -> None:
    stack.set_policy()
    for run_id in ("run-warm", "run-counted"):
        seed_held_run(stack.ledger_stub(), FIXTURE, run_id)
    admissions = stack.admissions()
    admissions.RequestInvalidReadContinuity(submission(stack.candidate_of("run-warm")))
    prepared = submission(stack.candidate_of("run-counted"))
    with counting(engine) as counts:
        admissions.RequestInvalidReadContinuity(prepared)
    rows = counts.table()
    print()
    print("| hop | calls | " + " | ".join(KINDS) + " |")
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k in ("hop", "calls", *KINDS)) + " |")
    assert rows
