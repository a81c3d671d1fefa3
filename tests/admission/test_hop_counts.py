"""What one admission costs at each hop, counted (issue 50 §2, tests/admission/hop_counting.py):
the bytes each RPC moves and the serializations, parses, JSON passes, SHA-256 hashers and
statements each served call runs. Counting is deterministic, so the counts are pinned: a change
that adds a repeat at any hop fails here and says where, and docs/performance.md shows the same
table (PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from services.demo.seed import load_fixture, seed_held_run
from tests.admission.conftest import Stack, submission
from tests.admission.hop_counting import CALLER, KINDS, counting, markdown, profiled_threads

FIXTURE = load_fixture("v1_basic")
PERFORMANCE = Path(__file__).resolve().parents[2] / "docs" / "performance.md"
V1 = "forge.continuity.v1."
RECONSTRUCTION = f"{V1}ReconstructionService.AnalyzeAndReconstructInvalidRead"
# (serialize, parse, JSON encode, JSON decode, SHA-256, statements on PostgreSQL, on SQLite) of
# each hop of the admission as the bench times it: after the operator's candidate read, whose
# reconstruction the candidate remembers by content (so the admission's candidate read asks
# reconstruction nothing).
ADMISSION = {
    CALLER: (1, 1, 0, 0, 0, 0, 0),
    f"{V1}AdmissionService.RequestInvalidReadContinuity": (3, 3, 1, 0, 4, 0, 0),
    f"{V1}CandidateService.GetInvalidReadContinuityCandidate": (2, 3, 22, 18, 9, 0, 0),
    f"{V1}LedgerService.GetRunSnapshot": (1, 1, 0, 0, 2, 1, 2),
    f"{V1}LedgerService.CommitAdmission": (1, 1, 20, 10, 10, 4, 11),
}


@pytest.fixture
def profiled() -> Iterator[None]:
    with profiled_threads():
        yield


def test_one_admission_counted_hop_by_hop(profiled: None, stack: Stack, engine: Engine) -> None:
    stack.set_policy()
    for run_id in ("run-first", "run-counted"):
        seed_held_run(stack.ledger_stub(), FIXTURE, run_id)
    admissions = stack.admissions()
    with counting(engine) as first_read:
        first = stack.candidate_of("run-first")
    admissions.RequestInvalidReadContinuity(submission(first))
    prepared = submission(stack.candidate_of("run-counted"))
    with counting(engine) as admission:
        admissions.RequestInvalidReadContinuity(prepared)

    postgresql = engine.dialect.name == "postgresql"
    rows = admission.table()
    counted = {row["hop"]: tuple(row[kind] for kind in KINDS[1:]) for row in rows}
    expected = {
        hop: (*values[:5], values[5] if postgresql else values[6])
        for hop, values in ADMISSION.items()
    }
    table = "\n".join(markdown(rows))
    assert counted == expected, f"the admission's counts moved; now:\n{table}"
    assert all(row["calls"] == 1 for row in rows if row["hop"] != CALLER)
    # The operator's first read of this content crosses the reconstruction hop as well (its
    # other rows include the process's one-time work, such as hashing the installed tree).
    first_rows = first_read.table()
    reconstruction = [row for row in first_rows if row["hop"] == RECONSTRUCTION]
    assert len(reconstruction) == 1 and reconstruction[0]["calls"] == 1
    if postgresql:
        documented = PERFORMANCE.read_text(encoding="utf-8")
        assert table in documented, f"docs/performance.md should show:\n{table}"
        row = markdown(reconstruction)[-1]
        assert row in documented, f"docs/performance.md should show:\n{row}"
