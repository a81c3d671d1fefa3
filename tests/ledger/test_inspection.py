"""LedgerService.InspectJournal on a real server, SQLite and PostgreSQL: the checks of historical
records, credential screening that reports and never echoes, every field kept, and refusals that
write nothing."""

from __future__ import annotations

import dataclasses
import json
import time

import grpc
from sqlalchemy import Engine, text

from forge.continuity.v1 import common_pb2, inspection_pb2
from services.demo.seed import HeldRunFixture, load_fixture, seed_held_run
from services.ledger.domain.credential_screening import RULES_VERSION, field_count
from shared.continuity.canonical import canonical_bytes, digest_of, sha256_digest
from tests.errors import expect_error
from tests.ledger.conftest import LedgerClients
from tests.support import as_database_owner, row_counts

FIXTURE = load_fixture("v1_basic")
S = inspection_pb2.InspectedRecordStatus
RK = inspection_pb2.InspectedRecordKind
K = common_pb2.JournalEntryKind
# Credential-shaped test values (no real credential has these).
AWS_KEY = "AKIA" + "ZX3Q7TESTVALUE42"
OPENAI_KEY = "sk-" + "proj-" + "t3st" * 8


def inspect(clients: LedgerClients, run_id: str) -> inspection_pb2.InspectJournalResponse:
    return clients.ledger("reader-token").InspectJournal(
        inspection_pb2.InspectJournalRequest(run_id=run_id)
    )


def with_secret_in_prompt(fixture: HeldRunFixture, secret: str) -> HeldRunFixture:
    envelope = json.loads(fixture.checkpoint)
    part = envelope["state"]["messages"][0]["parts"][0]
    part["content"] = part["content"] + f" Use key {secret} for the bucket."
    envelope["state_digest"] = digest_of(envelope["state"])
    return dataclasses.replace(fixture, checkpoint=canonical_bytes(envelope))


def test_every_record_is_checked_and_kept_with_its_telemetry_provenance(
    clients: LedgerClients, engine: Engine
) -> None:
    seeded = seed_held_run(clients.ledger(), FIXTURE, "run-1")
    before = row_counts(engine)
    report = inspect(clients, "run-1")
    assert row_counts(engine) == before  # a read: nothing written
    assert report.head.hash == seeded.head_hash
    assert [e.hash for e in report.entries] == [e.hash for e in seeded.entries]
    assert report.screening_rules == RULES_VERSION and report.credential_finding_count == 0
    checkpoint, response = report.records
    assert (checkpoint.kind, checkpoint.status) == (
        RK.INSPECTED_RECORD_KIND_HISTORICAL_CHECKPOINT,
        S.INSPECTED_RECORD_STATUS_INSPECTED,
    )
    assert (response.kind, response.status) == (
        RK.INSPECTED_RECORD_KIND_RAW_RESPONSE,
        S.INSPECTED_RECORD_STATUS_INSPECTED,
    )
    assert checkpoint.digest == seeded.checkpoint_digest
    assert checkpoint.sdk_epoch == "firefly-agentic-26.10.1/pydantic-ai-2.58.0"
    original = json.loads(FIXTURE.checkpoint)
    # Every field kept: with nothing to redact the report is the original record.
    assert json.loads(checkpoint.record_json) == original
    assert checkpoint.field_count == field_count(original)
    assert json.loads(checkpoint.telemetry_provenance_json) == {
        name: original["state"][name]
        for name in (
            "telemetry_mcp_url_ids",
            "telemetry_mcp_url_toolset_ids",
            "telemetry_mcp_url_tool_names",
        )
    }
    assert checkpoint.validator.standing == "original"
    assert checkpoint.validator.original_source_hash == checkpoint.validator.named_source_hash
    assert json.loads(response.record_json) == json.loads(FIXTURE.raw_response)


def test_credentials_are_reported_by_location_and_kind_never_echoed(
    clients: LedgerClients, engine: Engine
) -> None:
    fixture = with_secret_in_prompt(FIXTURE, AWS_KEY)

    def leak_in_held(
        entries: list[tuple[int, dict[str, object]]],
    ) -> list[tuple[int, dict[str, object]]]:
        kind, payload = entries[-1]
        return [*entries[:-1], (kind, {**payload, "logged_error": f"auth {OPENAI_KEY} refused"})]

    seed_held_run(clients.ledger(), fixture, "run-1", edit=leak_in_held)
    report = inspect(clients, "run-1")
    wire = report.SerializeToString()
    for secret in (AWS_KEY, OPENAI_KEY):
        assert secret.encode() not in wire
    checkpoint = report.records[0]
    assert checkpoint.status == S.INSPECTED_RECORD_STATUS_INSPECTED
    assert [(f.location, f.kind) for f in checkpoint.credential_findings] == [
        ("/state/messages/0/parts/0/content", "aws_access_key_id")
    ]
    kept = json.loads(checkpoint.record_json)
    assert "[REDACTED:aws_access_key_id]" in kept["state"]["messages"][0]["parts"][0]["content"]
    assert checkpoint.field_count == field_count(json.loads(fixture.checkpoint))
    assert field_count(kept) == checkpoint.field_count
    held = report.entries[-1]
    assert held.kind == K.JOURNAL_ENTRY_KIND_RUN_HELD
    assert [(f.location, f.kind) for f in held.credential_findings] == [
        ("/logged_error", "openai_api_key")
    ]
    assert report.credential_finding_count == 2


def test_a_record_failing_a_check_is_reported_unread(
    clients: LedgerClients, engine: Engine
) -> None:
    seeded = seed_held_run(clients.ledger(), load_fixture("refused_digest"), "run-digest")
    assert (
        inspect(clients, "run-digest").records[0].status == S.INSPECTED_RECORD_STATUS_NOT_CANONICAL
    )
    seed_held_run(clients.ledger(), load_fixture("refused_sdk_pair"), "run-pair")
    pair = inspect(clients, "run-pair").records[0]
    assert pair.status == S.INSPECTED_RECORD_STATUS_EPOCH_UNKNOWN
    assert pair.problem.startswith("/runtime/pydantic_ai") and not pair.record_json
    seed_held_run(clients.ledger(), load_fixture("refused_counter_bounds"), "run-budget")
    budget = inspect(clients, "run-budget").records[0]
    assert budget.status == S.INSPECTED_RECORD_STATUS_BUDGET_REFUSED
    assert budget.problem.startswith("/state/messages/1/usage/output_reasoning_tokens")
    # A stored blob altered underneath its digest.
    with as_database_owner(engine) as connection:
        connection.execute(
            text("UPDATE blobs SET content = :c WHERE digest = :d"),
            {"c": b"{}", "d": seeded.response_digest},
        )
    assert (
        inspect(clients, "run-digest").records[1].status == S.INSPECTED_RECORD_STATUS_HASH_MISMATCH
    )


def test_a_missing_record_is_reported(clients: LedgerClients) -> None:
    missing = sha256_digest(b"never stored")

    def elsewhere(
        entries: list[tuple[int, dict[str, object]]],
    ) -> list[tuple[int, dict[str, object]]]:
        return [
            (k, {**p, "checkpoint_digest": missing})
            if k == K.JOURNAL_ENTRY_KIND_CHECKPOINT_STORED
            else (k, p)
            for k, p in entries
        ]

    seed_held_run(clients.ledger(), FIXTURE, "run-1", edit=elsewhere)
    record = inspect(clients, "run-1").records[0]
    assert (record.digest, record.status) == (missing, S.INSPECTED_RECORD_STATUS_BLOB_MISSING)


def test_a_broken_chain_or_row_refuses_the_inspection_and_writes_nothing(
    clients: LedgerClients, engine: Engine
) -> None:
    seed_held_run(clients.ledger(), FIXTURE, "run-1")
    with as_database_owner(engine) as connection:
        connection.execute(
            text(
                "UPDATE journal_entries SET payload_json = :p "
                "WHERE run_id = 'run-1' AND sequence = 3"
            ),
            {"p": json.dumps({"command_id": "cmd-02", "command_digest": digest_of("x")})},
        )
    before = row_counts(engine)
    error = expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "INSPECTION_CHAIN_BROKEN",
        lambda: inspect(clients, "run-1"),
    )
    assert error.metadata["sequence"] == "3"

    def not_a_digest(
        entries: list[tuple[int, dict[str, object]]],
    ) -> list[tuple[int, dict[str, object]]]:
        # a string that is no digest is refused at the append; another type still gets through
        return [
            (k, {**p, "checkpoint_digest": 1})
            if k == K.JOURNAL_ENTRY_KIND_CHECKPOINT_STORED
            else (k, p)
            for k, p in entries
        ]

    seed_held_run(clients.ledger(), FIXTURE, "run-2", edit=not_a_digest)
    before = row_counts(engine)
    error = expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "INSPECTION_ROW_MISMATCH",
        lambda: inspect(clients, "run-2"),
    )
    assert error.metadata["field"] == "checkpoint_digest"
    expect_error(grpc.StatusCode.NOT_FOUND, "RUN_NOT_FOUND", lambda: inspect(clients, "run-none"))
    expect_error(
        grpc.StatusCode.INVALID_ARGUMENT, "FIELD_INVALID", lambda: inspect(clients, "bad id")
    )
    assert row_counts(engine) == before


def test_inspection_requires_authentication(clients: LedgerClients) -> None:
    stub = clients.ledger("no-such-token")
    expect_error(
        grpc.StatusCode.UNAUTHENTICATED,
        "CREDENTIALS_UNKNOWN",
        lambda: stub.InspectJournal(inspection_pb2.InspectJournalRequest(run_id="run-1")),
    )


def test_a_pathological_payload_is_screened_within_a_second(clients: LedgerClients) -> None:
    # 64 KiB on which the backtracking rules spent seconds of CPU, holding the GIL.
    hostile = "a-" * 32768

    def hostile_note(
        entries: list[tuple[int, dict[str, object]]],
    ) -> list[tuple[int, dict[str, object]]]:
        kind, payload = entries[-1]
        return [*entries[:-1], (kind, {**payload, "note": hostile})]

    seed_held_run(clients.ledger(), FIXTURE, "run-1", edit=hostile_note)
    started = time.monotonic()
    report = inspect(clients, "run-1")
    # A liveness bound (the issue's): the old rules took several seconds on this payload.
    assert time.monotonic() - started < 1.0
    assert report.credential_finding_count == 0
    assert json.loads(report.entries[-1].payload_json)["note"] == hostile
