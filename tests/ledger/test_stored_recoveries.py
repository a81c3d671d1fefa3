"""Stored recoveries are versioned records with explicit keys, like stored tickets."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from services.ledger.domain.execution import LeaseBounds, LeaseLimit
from services.ledger.domain.recoveries import (
    RECORD_VERSION,
    RecoveryRecordError,
    StoredRecovery,
)
from shared.continuity.canonical import digest_of

RECOVERY = StoredRecovery(
    run_id="run-1",
    request_id="req-1",
    recovery_id="rec-1",
    workflow="never_claimed",
    actor="ada-admin-operator",
    request_content_digest=digest_of("content"),
    candidate_digest=digest_of("candidate"),
    execution_request_id="exr_0123456789abcdef01234567",
    witness_sequence=24,
    event_sequence=25,
    lease_seconds=900,
    created_at="2026-12-03T05:00:00.000000Z",
)


def test_a_record_round_trips_with_explicit_keys() -> None:
    record = json.loads(RECOVERY.to_text())
    assert record["record_version"] == RECORD_VERSION == 1
    assert set(record) == {
        "record_version", "run_id", "request_id", "recovery_id", "workflow", "actor",
        "request_content_digest", "candidate_digest", "execution_request_id",
        "witness_sequence", "event_sequence", "lease_seconds", "created_at",
        "settlement_sequence", "reviewed_rejection_digest", "derived_checkpoint_digest",
    }  # fmt: skip
    assert StoredRecovery.from_text(RECOVERY.to_text()) == RECOVERY


def test_a_record_written_before_the_rejected_boundary_keys_still_reads() -> None:
    record = RECOVERY.to_record()
    del record["settlement_sequence"], record["reviewed_rejection_digest"]
    read = StoredRecovery.from_record(record)
    assert (read.settlement_sequence, read.reviewed_rejection_digest) == (0, "")
    assert read == RECOVERY


def test_a_record_written_before_the_readonly_observation_key_still_reads() -> None:
    record = RECOVERY.to_record()
    del record["derived_checkpoint_digest"]
    read = StoredRecovery.from_record(record)
    assert read.derived_checkpoint_digest == ""
    assert read == RECOVERY


@pytest.mark.parametrize(
    "damage",
    [{"record_version": 2}, {"record_version": None}, {"witness_sequence": "x"}, {"actor": None}],
)
def test_an_unknown_version_or_a_damaged_row_is_refused(damage: dict[str, object]) -> None:
    record = {**RECOVERY.to_record(), **damage}
    if damage.get("actor", "") is None:
        del record["actor"]
    with pytest.raises(RecoveryRecordError):
        StoredRecovery.from_record(record)


def test_lease_bounds_are_an_optional_key_and_old_rows_read_without_them() -> None:
    bounds = LeaseBounds(900, 3600, 1200, -1, 7200, 900, LeaseLimit.REQUESTED)
    kept = replace(RECOVERY, lease_bounds=bounds)
    assert json.loads(kept.to_text())["lease_bounds"]["limited_by"] == "requested"
    assert StoredRecovery.from_text(kept.to_text()) == kept
    assert "lease_bounds" not in RECOVERY.to_record()
    assert StoredRecovery.from_record(RECOVERY.to_record()).lease_bounds is None
    with pytest.raises(RecoveryRecordError):
        StoredRecovery.from_record({**kept.to_record(), "lease_bounds": {"granted_seconds": 1}})
