"""What a claim re-reads of the custody its request was admitted against (ADR 0045): the worker's
installed-code profile digest, the ticket and its settlement rows, and the source every
``run_started`` records. Each refusal writes nothing and parks nothing (no admission-refusal
record: another worker, or an operator's judgement, can cure it). Real ledger server, SQLite and
PostgreSQL; the rewrites are made with the database owner's access, which the ledger lacks."""

from __future__ import annotations

import json

import grpc
from sqlalchemy import Engine, text

from forge.continuity.v1 import common_pb2, execution_pb2
from shared.continuity.canonical import canonical_text, parse_json
from shared.continuity.qualification import installed_profile
from tests.errors import expect_error
from tests.ledger.admission_support import admitted, claim_request, execution
from tests.ledger.conftest import LedgerClients
from tests.support import as_database_owner, row_counts, whole_journal

OTHER_DIGEST = "sha256:" + "e" * 64


def refused_writing_nothing(
    clients: LedgerClients, engine: Engine, exr: str, reason: str, **claim: object
) -> dict[str, str]:
    counts = row_counts(engine)
    error = expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        reason,
        lambda: execution(clients).ClaimExecutionRequest(claim_request(clients, exr, **claim)),
    )
    assert row_counts(engine) == counts
    queued = execution(clients, "reader-token").GetExecutionRequest(
        execution_pb2.GetExecutionRequestRequest(execution_request_id=exr)
    )
    assert queued.execution_request.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED
    assert not queued.execution_request.admission_refusal  # still scheduled automatically
    return dict(error.metadata)


def rewrite_payload(engine: Engine, run_id: str, sequence: int, **changes: object) -> None:
    """The database owner rewrites one journal payload in place (its hash left as it was)."""
    with as_database_owner(engine) as connection:
        where = {"run_id": run_id, "sequence": sequence}
        stored = connection.execute(
            text(
                "SELECT payload_json FROM journal_entries "
                "WHERE run_id = :run_id AND sequence = :sequence"
            ),
            where,
        ).scalar_one()
        payload = {**parse_json(stored), **changes}
        connection.execute(
            text(
                "UPDATE journal_entries SET payload_json = :payload "
                "WHERE run_id = :run_id AND sequence = :sequence"
            ),
            {**where, "payload": canonical_text(payload)},
        )


def test_a_worker_presenting_another_installed_profile_digest_is_refused(
    clients: LedgerClients, engine: Engine
) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    metadata = refused_writing_nothing(
        clients, engine, exr, "PROFILE_DIGEST_MISMATCH", profile_digest=OTHER_DIGEST
    )
    assert metadata["presented_digest"] == OTHER_DIGEST
    assert metadata["qualified_digest"] == installed_profile().digest
    counts = row_counts(engine)
    expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_INVALID",
        lambda: execution(clients).ClaimExecutionRequest(
            claim_request(clients, exr, profile_digest="sha256:short")
        ),
    )
    assert row_counts(engine) == counts
    # the qualified digest claims, and the claim records what the worker presented
    claimed = execution(clients).ClaimExecutionRequest(
        claim_request(clients, exr, profile_digest=installed_profile().digest)
    )
    recorded = json.loads(claimed.worker_claimed_entry.payload_json)
    assert recorded["profile_digest"] == installed_profile().digest


def test_a_worker_of_an_earlier_release_presenting_no_digest_still_claims(
    clients: LedgerClients,
) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    claimed = execution(clients).ClaimExecutionRequest(claim_request(clients, exr))
    assert "profile_digest" not in json.loads(claimed.worker_claimed_entry.payload_json)


def test_a_ticket_row_rewritten_after_admission_stops_the_claim(
    clients: LedgerClients, engine: Engine
) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    with as_database_owner(engine) as connection:
        stored = connection.execute(
            text("SELECT ticket_json FROM admission_tickets WHERE run_id = 'run-1'")
        ).scalar_one()
        record = {**parse_json(stored), "derived_checkpoint_digest": OTHER_DIGEST}
        connection.execute(
            text("UPDATE admission_tickets SET ticket_json = :record WHERE run_id = 'run-1'"),
            {"record": canonical_text(record)},
        )
    metadata = refused_writing_nothing(clients, engine, exr, "TICKET_CHANGED")
    assert metadata["changed"] == (
        "settlement.derived_checkpoint_digest,execution_request.checkpoint_digest"
    )
    assert metadata["request_id"] == "req-1"


def test_a_settlement_or_ownership_claim_rewritten_after_admission_stops_the_claim(
    clients: LedgerClients, engine: Engine
) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    entries = whole_journal(clients.ledger("reader-token"), "run-1")
    (settlement,) = [
        e for e in entries if e.kind == common_pb2.JOURNAL_ENTRY_KIND_MIGRATION_SETTLEMENT
    ]
    (claim,) = [e for e in entries if e.kind == common_pb2.JOURNAL_ENTRY_KIND_OWNERSHIP_CLAIM]
    rewrite_payload(engine, "run-1", settlement.sequence, policy_revision=99)
    metadata = refused_writing_nothing(clients, engine, exr, "TICKET_CHANGED")
    assert metadata["changed"] == "settlement"  # its hash no longer is its content's
    rewrite_payload(engine, "run-1", settlement.sequence, **json.loads(settlement.payload_json))
    rewrite_payload(engine, "run-1", claim.sequence, attempt_id="att-other")
    metadata = refused_writing_nothing(clients, engine, exr, "TICKET_CHANGED")
    assert metadata["changed"] == "ownership_claim"
    # restored, the rows are the admitted ones again and the claim proceeds
    rewrite_payload(engine, "run-1", claim.sequence, **json.loads(claim.payload_json))
    claimed = execution(clients).ClaimExecutionRequest(claim_request(clients, exr))
    assert claimed.execution_request.state == common_pb2.EXECUTION_REQUEST_STATE_CLAIMED


def test_a_run_started_recording_another_source_after_admission_stops_the_claim(
    clients: LedgerClients, engine: Engine
) -> None:
    """Through the ledger a native run_started cannot land after admission: the admission judged
    the head it queued at, and a later one is refused while the ticket is outstanding
    (CONTINUITY_TICKET_OUTSTANDING) or stops the claim (NATIVE_JOURNAL_CHANGED). A rewrite of the
    run_started the admission judged sits before the queueing entry, where neither looks: the
    claim reads every run_started and refuses another source."""
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    entries = whole_journal(clients.ledger("reader-token"), "run-1")
    (started,) = [e for e in entries if e.kind == common_pb2.JOURNAL_ENTRY_KIND_RUN_STARTED]
    rewrite_payload(engine, "run-1", started.sequence, source_revision="git:0ther")
    metadata = refused_writing_nothing(clients, engine, exr, "RUN_STARTED_SOURCE_CHANGED")
    assert (metadata["sequence"], metadata["changed"]) == (str(started.sequence), "source_revision")
