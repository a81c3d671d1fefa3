"""Stored tickets are versioned records with explicit keys, mapped to protobuf field by field:
renaming a contract field can never make old rows unreadable."""

from __future__ import annotations

import ast
import json
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from forge.continuity.v1 import common_pb2
from services.ledger.domain.execution import (
    ExecutionRequestRecord,
    LeaseBounds,
    LeaseLimit,
    RequestState,
)
from services.ledger.domain.tickets import RECORD_VERSION, StoredTicket, TicketRecordError
from services.ledger.schema import admission_tickets
from services.ledger.servicer import ticket_to_proto
from shared.continuity.canonical import digest_of
from tests.ledger.admission_support import commit, commit_request, enable_policy, seed
from tests.ledger.conftest import LedgerClients

ROOT = Path(__file__).resolve().parents[2]
DIGESTS = {
    "candidate_digest": digest_of("candidate"),
    "run_digest": digest_of("run"),
    "journal_digest": digest_of("journal"),
    "policy_digest": digest_of("policy"),
}
TICKET = StoredTicket(
    run_id="run-1",
    request_id="req-1",
    operator_identity="olga-operator",
    settlement_sequence=20,
    claim_sequence=21,
    digests=DIGESTS,
    policy_revision=2,
    version=1,
    derived_checkpoint_digest=digest_of("derived"),
    request_content_digest=digest_of("content"),
    execution_request_id="exr_0123456789abcdef01234567",
    created_at="2026-12-01T12:00:00.000000Z",
)
# A version-1 record exactly as this release writes it. Frozen here: a reader that followed
# protobuf field names instead of these keys would break on a contract rename.
RECORD_V1 = {
    "record_version": 1,
    "run_id": "run-1",
    "request_id": "req-1",
    "operator_identity": "olga-operator",
    "settlement_sequence": 20,
    "claim_sequence": 21,
    "digests": DIGESTS,
    "policy_revision": 2,
    "version": 1,
    "derived_checkpoint_digest": digest_of("derived"),
    "request_content_digest": digest_of("content"),
    "execution_request_id": "exr_0123456789abcdef01234567",
    "created_at": "2026-12-01T12:00:00.000000Z",
}


def test_a_stored_ticket_round_trips_through_its_versioned_record() -> None:
    assert TICKET.to_record() == RECORD_V1
    assert RECORD_VERSION == 1
    assert StoredTicket.from_text(TICKET.to_text()) == TICKET
    assert StoredTicket.from_record(RECORD_V1) == TICKET


def test_rows_written_before_records_were_versioned_are_still_read() -> None:
    legacy = {k: v for k, v in RECORD_V1.items() if k != "record_version"}
    assert StoredTicket.from_text(json.dumps(legacy)) == TICKET


BOUNDS = LeaseBounds(
    requested_seconds=1800,
    policy_window_seconds=3600,
    provider_timeout_seconds=900,
    deadline_remaining_seconds=-1,
    maximum_seconds=7200,
    granted_seconds=900,
    limited_by=LeaseLimit.PROVIDER_TIMEOUT,
)
BOUNDS_RECORD = {
    "requested_seconds": 1800,
    "policy_window_seconds": 3600,
    "provider_timeout_seconds": 900,
    "deadline_remaining_seconds": -1,
    "maximum_seconds": 7200,
    "granted_seconds": 900,
    "limited_by": "provider_timeout",
}


def test_lease_bounds_are_an_optional_key_of_the_same_version() -> None:
    """Rows saved before the bounds were kept stay readable (no bounds); new rows keep them
    under explicit keys, and the ticket answer maps them field by field."""
    with_bounds = replace(TICKET, lease_bounds=BOUNDS)
    assert with_bounds.to_record() == {**RECORD_V1, "lease_bounds": BOUNDS_RECORD}
    assert StoredTicket.from_text(with_bounds.to_text()) == with_bounds
    assert StoredTicket.from_record(RECORD_V1).lease_bounds is None
    proto = ticket_to_proto(with_bounds, _queued()).lease_bounds
    assert (proto.requested_seconds, proto.granted_seconds) == (1800, 900)
    assert proto.limited_by == common_pb2.LEASE_BOUND_PROVIDER_TIMEOUT
    assert not ticket_to_proto(TICKET, _queued()).HasField("lease_bounds")
    with pytest.raises(TicketRecordError):
        StoredTicket.from_record({**RECORD_V1, "lease_bounds": {**BOUNDS_RECORD, "limited_by": 7}})


@pytest.mark.parametrize(
    "record",
    [
        {**RECORD_V1, "record_version": 2},
        {k: v for k, v in RECORD_V1.items() if k != "digests"},
        {**RECORD_V1, "claim_sequence": "twenty-one"},
    ],
)
def test_unreadable_records_are_named(record: dict[str, object]) -> None:
    with pytest.raises(TicketRecordError):
        StoredTicket.from_record(record)


def _queued() -> ExecutionRequestRecord:
    return ExecutionRequestRecord(
        execution_request_id=TICKET.execution_request_id,
        run_id="run-1",
        attempt_id="attempt-1",
        request_id="req-1",
        checkpoint_digest=TICKET.derived_checkpoint_digest,
        policy_revision=2,
        state=RequestState.QUEUED,
        lease_generation=0,
        lease_seconds=900,
        lease_expires_at="2026-12-01T12:15:00.000000Z",
        owner="",
        created_at=TICKET.created_at,
        updated_at=TICKET.created_at,
    )


def test_the_protobuf_ticket_is_mapped_field_by_field() -> None:
    proto = ticket_to_proto(TICKET, _queued())
    assert (proto.run_id, proto.request_id, proto.operator_identity) == (
        "run-1",
        "req-1",
        "olga-operator",
    )
    assert (proto.settlement_sequence, proto.claim_sequence, proto.policy_revision) == (20, 21, 2)
    assert proto.digests == common_pb2.ContinuityDigests(**DIGESTS)
    assert proto.derived_checkpoint_digest == TICKET.derived_checkpoint_digest
    assert proto.request_content_digest == TICKET.request_content_digest
    assert proto.created_at.ToJsonString() == "2026-12-01T12:00:00Z"
    assert proto.execution_request.execution_request_id == TICKET.execution_request_id
    assert proto.execution_request.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED


def test_no_ledger_module_parses_stored_records_by_protobuf_field_names() -> None:
    """json_format would tie stored rows to the contract's field names."""
    for path in (ROOT / "services" / "ledger").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom | ast.Import)
            for alias in node.names
        }
        assert "json_format" not in imported, f"{path} imports json_format"


def test_the_ledger_writes_a_versioned_record(clients: LedgerClients, engine: Engine) -> None:
    seeded = seed(clients)
    enable_policy(clients)
    ticket = commit(clients, commit_request(clients, seeded)).ticket
    with engine.connect() as connection:
        stored = connection.execute(select(admission_tickets.c.ticket_json)).scalar_one()
    record = json.loads(stored)
    assert record["record_version"] == RECORD_VERSION
    assert set(record) == {*RECORD_V1, "lease_bounds"}
    assert record["lease_bounds"]["granted_seconds"] == ticket.lease_bounds.granted_seconds
    assert record["settlement_sequence"] == ticket.settlement_sequence
