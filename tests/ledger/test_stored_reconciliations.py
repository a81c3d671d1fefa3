"""Stored reconciliations are versioned records with their handoff payload; a damaged or newer
record is refused, never guessed."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from services.ledger.domain.execution import LeaseBounds, LeaseLimit
from services.ledger.domain.reconciliation_records import (
    ReconciliationRecordError,
    StoredReconciliation,
)
from shared.continuity.admissibility_facts import (
    MARK_UNRESOLVED,
    BoundRequest,
    Consumed,
    Handoff,
    KnownEffect,
    PermittedAction,
    RemainingObligation,
    UnresolvedAlternative,
)
from shared.continuity.canonical import digest_of, sha256_digest

HANDOFF = Handoff(
    bound_requests=(BoundRequest("req-1", "exr_1", "claimed", True, False),),
    known_effects=(KnownEffect("worker wanda claimed exr_1 at generation 1", 31),),
    unresolved_alternatives=(UnresolvedAlternative("exr_1", ("failed", "committed", "in_flight")),),
    remaining_obligations=(
        RemainingObligation("continue request req-1 in the original attempt", ""),
    ),
    permitted_next_actions=(PermittedAction(MARK_UNRESOLVED, "record it"),),
    consumed=Consumed(1, 2, 13, 22, -1),
)
SAVED = StoredReconciliation(
    run_id="run-1",
    request_id="req-1",
    reconciliation_id="rcn-1",
    execution_request_id="exr_1",
    decision=MARK_UNRESOLVED,
    actor="alice-admin",
    request_content_digest=digest_of("content"),
    reconciliation_digest=digest_of("snapshot"),
    evidence_reference="incident-42",
    fenced_lease_generation=1,
    verification_sequence=0,
    settlement_sequence=40,
    retry_execution_request_id="",
    handoff=HANDOFF,
    created_at="2026-12-03T05:00:00.000000Z",
)


def test_the_stored_bytes_are_those_saved_before_the_handoff_had_one_type() -> None:
    """Recorded from the record the pair-typed handoff wrote: effects, alternatives and
    obligations stay stored as pairs."""
    text = SAVED.to_text()
    assert json.loads(text)["handoff"]["known_effects"] == [
        ["worker wanda claimed exr_1 at generation 1", 31]
    ]
    assert sha256_digest(text.encode()) == (
        "sha256:0055c3a5491acdc7d09826ebed90bb20682e8d0c8d911d2d401fa62eca9cbd8e"
    )


def test_a_record_round_trips_with_its_handoff() -> None:
    text = SAVED.to_text()
    assert json.loads(text)["record_version"] == 1
    assert StoredReconciliation.from_text(text) == SAVED
    retried = replace(SAVED, decision="retry_stage", retry_execution_request_id="exr_2")
    assert StoredReconciliation.from_text(retried.to_text()) == retried


@pytest.mark.parametrize(
    "edit",
    [
        lambda r: r.update(record_version=2),
        lambda r: r.pop("handoff"),
        lambda r: r["handoff"].pop("consumed"),
        lambda r: r.update(settlement_sequence="forty"),
        lambda r: r.update(surprise=True),
    ],
)
def test_a_newer_or_damaged_record_is_refused(edit: object) -> None:
    record = json.loads(SAVED.to_text())
    edit(record)  # type: ignore[operator]
    with pytest.raises(ReconciliationRecordError):
        StoredReconciliation.from_text(json.dumps(record))


def test_a_retry_keeps_its_lease_bounds_and_old_rows_read_without_them() -> None:
    bounds = LeaseBounds(900, 600, 1200, 3000, 7200, 600, LeaseLimit.POLICY_WINDOW)
    retried = replace(
        SAVED, decision="retry_stage", retry_execution_request_id="exr_2", lease_bounds=bounds
    )
    assert json.loads(retried.to_text())["lease_bounds"]["limited_by"] == "policy_window"
    assert StoredReconciliation.from_text(retried.to_text()) == retried
    assert "lease_bounds" not in json.loads(SAVED.to_text())
    assert StoredReconciliation.from_text(SAVED.to_text()).lease_bounds is None


def test_an_acknowledged_unproven_cessation_is_kept_and_older_rows_read_without_it() -> None:
    acknowledged = replace(SAVED, cessation_unproven_acknowledged=True)
    record = json.loads(acknowledged.to_text())
    assert record["cessation_unproven_acknowledged"] is True
    assert StoredReconciliation.from_text(acknowledged.to_text()) == acknowledged
    # a row saved before the acknowledgement existed has no such key: the bytes are unchanged
    assert "cessation_unproven_acknowledged" not in json.loads(SAVED.to_text())
    assert not StoredReconciliation.from_text(SAVED.to_text()).cessation_unproven_acknowledged
    record["cessation_unproven_acknowledged"] = "yes"
    with pytest.raises(ReconciliationRecordError):
        StoredReconciliation.from_text(json.dumps(record))
