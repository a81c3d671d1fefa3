"""Scenario 2: a reused request_id with one field changed, and empty, oversized and malformed
request ids, at the admission service and at the ledger's own CommitAdmission.

Invariant: the documented code and reason (ALREADY_EXISTS REQUEST_ID_CONFLICT for a changed
request; INVALID_ARGUMENT FIELD_INVALID / FIELD_REQUIRED for a bad id), and 0 rows written.
"""

from __future__ import annotations

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from forge.continuity.v1 import ledger_pb2, ledger_pb2_grpc
from services.demo.seed import load_fixture, seed_held_run
from shared.continuity.canonical import digest_of
from shared.continuity.identifiers import IDENTIFIER
from tests.admission.conftest import Stack, submission
from tests.errors import expect_error
from tests.reliability.scale import FULL, report, scale
from tests.support import row_counts

FIXTURE = load_fixture("v1_basic")
EXAMPLES = scale(fast=25, full=400)
FIXED_BAD_IDS = ["", " ", "x" * 129, "x" * 4096, "req-1\n", "req 1", "req/1", "ré", "\x00", "a\tb"]
# Any text that is not an identifier: hypothesis searches near the edges of the alphabet.
bad_ids = st.text(alphabet=st.characters(codec="utf-8"), min_size=0, max_size=300).filter(
    lambda value: not IDENTIFIER.match(value)
)
# The same request_id with one field changed.
CHANGED_FIELDS: list[dict[str, object]] = [
    {"valid_for_seconds": 60},
    {"valid_for_seconds": 1799},
    {"valid_for_seconds": 7200},
]


@pytest.mark.parametrize(
    "database_url", ["sqlite", "postgresql"] if FULL else ["sqlite"], indirect=True
)
def test_reused_and_malformed_request_ids_write_nothing(
    stack: Stack, engine: Engine, database_url: str
) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    candidate = stack.candidate_of("run-1")
    admissions = stack.admissions()
    admissions.RequestInvalidReadContinuity(submission(candidate))
    counts = row_counts(engine)
    commit_stub = ledger_pb2_grpc.LedgerServiceStub(stack.ledger.channel("service-token"))
    checked = {"changed_field": 0, "admission_bad_id": 0, "ledger_bad_id": 0}

    for change in CHANGED_FIELDS:
        expect_error(
            grpc.StatusCode.ALREADY_EXISTS,
            "REQUEST_ID_CONFLICT",
            lambda change=change: admissions.RequestInvalidReadContinuity(  # type: ignore[misc]
                submission(candidate, **change)
            ),
        )
        checked["changed_field"] += 1

    def refuse(request_id: str) -> None:
        expect_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            "FIELD_INVALID",
            lambda: admissions.RequestInvalidReadContinuity(
                submission(candidate, request_id=request_id)
            ),
        )
        checked["admission_bad_id"] += 1
        expect_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            "FIELD_INVALID" if request_id else "FIELD_REQUIRED",
            lambda: commit_stub.CommitAdmission(
                ledger_pb2.CommitAdmissionRequest(
                    run_id="run-1",
                    request_id=request_id,
                    operator_identity="olga-operator",
                    request_content_digest=digest_of({"request": request_id}),
                )
            ),
        )
        checked["ledger_bad_id"] += 1
        assert row_counts(engine) == counts, repr(request_id)

    for request_id in FIXED_BAD_IDS:
        refuse(request_id)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(bad_ids)
    def generated(request_id: str) -> None:
        refuse(request_id)

    generated()
    assert row_counts(engine) == counts
    report(
        "request_ids",
        backend=database_url.split(":", 1)[0].split("+", 1)[0],
        **checked,
        rows_written=0,
    )
