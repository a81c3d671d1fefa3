"""Historical policy epochs inside the admission transaction, SQLite and PostgreSQL: the
migration receipt binds both epochs; an unrecognized adoption is refused and writes nothing;
recognition grants no replay of the consumed response and no restore of an expired claim."""

from __future__ import annotations

import json
from types import MappingProxyType

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, execution_pb2
from services.demo.seed import HISTORICAL_CHECKPOINT_MODE
from shared.continuity import policy_epochs
from shared.continuity.canonical import digest_of
from shared.continuity.policy_epochs import CURRENT_EPOCH, catalog_digest
from shared.continuity.qualification import DEFAULT_QUALIFIED_PROFILE
from tests.errors import expect_error
from tests.ledger.admission_support import (
    claim_request,
    commit,
    commit_request,
    enable_policy,
    execution,
    journal_kinds,
    seed,
)
from tests.ledger.conftest import Clock, LedgerClients
from tests.support import row_counts, whole_journal

K = common_pb2.JournalEntryKind


def entries(clients: LedgerClients, run_id: str) -> list[common_pb2.JournalEntry]:
    return list(whole_journal(clients.ledger("reader-token"), run_id))


def first(found: list[common_pb2.JournalEntry], kind: int) -> common_pb2.JournalEntry:
    return next(e for e in found if e.kind == kind)


def test_the_receipt_records_both_epochs_bound_to_the_old_native_references(
    clients: LedgerClients,
) -> None:
    policy = enable_policy(clients)
    seeded = seed(clients)
    commit(clients, commit_request(clients, seeded))
    journal = entries(clients, "run-1")
    settlement = json.loads(first(journal, K.JOURNAL_ENTRY_KIND_MIGRATION_SETTLEMENT).payload_json)
    epochs = settlement["policy_epochs"]
    adopted = epochs["adopted_epoch"]
    assert adopted["epoch_id"] == "checkpoint-mode/1"
    assert {k: adopted[k] for k in HISTORICAL_CHECKPOINT_MODE} == dict(HISTORICAL_CHECKPOINT_MODE)
    assert epochs["current_epoch"]["epoch_id"] == CURRENT_EPOCH.epoch_id
    assert epochs["namespace"] == "invalid-read-continuity/preparation"
    assert epochs["catalog_digest"] == catalog_digest()
    old = [
        first(journal, kind)
        for kind in (
            K.JOURNAL_ENTRY_KIND_RUN_STARTED,
            K.JOURNAL_ENTRY_KIND_CHECKPOINT_STORED,
            K.JOURNAL_ENTRY_KIND_RESPONSE_CONSUMED,
        )
    ]
    assert [(r["sequence"], r["hash"]) for r in epochs["native_references"]] == [
        (e.sequence, e.hash) for e in old
    ]
    assert epochs["checkpoint_digest"] == seeded.checkpoint_digest
    assert epochs["source_profile"] == DEFAULT_QUALIFIED_PROFILE
    assert epochs["lease_policy_revision"] == policy.revision == settlement["policy_revision"]
    body = {k: v for k, v in epochs.items() if k != "binding_digest"}
    assert epochs["binding_digest"] == digest_of(body)
    # The old adoption stays byte-identical.
    assert journal[0] == seeded.entries[0]


def test_a_run_without_an_adoption_records_only_the_current_epoch(clients: LedgerClients) -> None:
    enable_policy(clients)
    seeded = seed(clients, checkpoint_mode=None)
    commit(clients, commit_request(clients, seeded))
    settlement = first(entries(clients, "run-1"), K.JOURNAL_ENTRY_KIND_MIGRATION_SETTLEMENT)
    epochs = json.loads(settlement.payload_json)["policy_epochs"]
    assert epochs["adopted_epoch"] is None
    assert epochs["current_epoch"]["epoch_id"] == CURRENT_EPOCH.epoch_id


def test_an_uncatalogued_or_malformed_adoption_is_refused_and_writes_nothing(
    clients: LedgerClients, engine: Engine
) -> None:
    enable_policy(clients)
    cases = {
        "run-other": {**HISTORICAL_CHECKPOINT_MODE, "acknowledgement": "acknowledge_other"},
        "run-malformed": {"selection": "original"},
    }
    for run_id, adoption in cases.items():
        seeded = seed(clients, run_id, checkpoint_mode=adoption)
        before = row_counts(engine)
        error = expect_error(
            grpc.StatusCode.FAILED_PRECONDITION,
            "POLICY_EPOCH_UNRECOGNIZED",
            lambda seeded=seeded: commit(clients, commit_request(clients, seeded)),  # type: ignore[misc]
        )
        assert error.metadata["field"] == "run_started/checkpoint_mode"
        assert row_counts(engine) == before


def test_an_unqualified_profile_does_not_recognize_the_historical_epoch(
    clients: LedgerClients, engine: Engine
) -> None:
    enable_policy(clients)
    seeded = seed(clients, source_profile="profile-not-qualified")
    before = row_counts(engine)
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "POLICY_EPOCH_UNRECOGNIZED",
        lambda: commit(clients, commit_request(clients, seeded)),
    )
    assert row_counts(engine) == before


def test_recognition_grants_no_replay_and_no_restore_of_an_expired_claim(
    clients: LedgerClients, clock: Clock, engine: Engine
) -> None:
    enable_policy(clients)
    seeded = seed(clients)
    ticket = commit(clients, commit_request(clients, seeded)).ticket
    # The consumed response is admitted once: another request id cannot replay it.
    before = row_counts(engine)
    expect_error(
        grpc.StatusCode.ALREADY_EXISTS,
        "CONSUMED_GRAPH_ALREADY_ADMITTED",
        lambda: commit(clients, commit_request(clients, seeded, "req-2")),
    )
    # An expired claim is not restored under the recognized epoch.
    clock.advance(ticket.execution_request.lease.seconds + 1)
    exr = ticket.execution_request.execution_request_id
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "LEASE_EXPIRED",
        lambda: execution(clients).ClaimExecutionRequest(claim_request(clients, exr)),
    )
    assert row_counts(engine) == before


def test_a_claim_recognizes_the_epoch_again_under_the_installed_catalog(
    clients: LedgerClients, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    enable_policy(clients)
    seeded = seed(clients)
    ticket = commit(clients, commit_request(clients, seeded)).ticket
    exr = ticket.execution_request.execution_request_id
    # A release whose reviewed catalog no longer lists the historical epoch (the ledger runs
    # in this process, so replacing the catalog is replacing the installed package data).
    monkeypatch.setattr(policy_epochs, "HISTORICAL_EPOCHS", MappingProxyType({}))
    before = row_counts(engine)
    for _ in range(2):
        expect_error(
            grpc.StatusCode.FAILED_PRECONDITION,
            "POLICY_EPOCH_UNRECOGNIZED",
            lambda: execution(clients).ClaimExecutionRequest(claim_request(clients, exr)),
        )
    # The refusal while entering the epoch claims nothing; it leaves one native admission-refusal
    # record (however often it is refused) and the request ineligible for automatic scheduling.
    assert row_counts(engine) == {**before, "journal_entries": before["journal_entries"] + 1}
    assert journal_kinds(clients, "run-1")[-1] == "admission_refusal"
    parked = execution(clients).GetExecutionRequest(
        execution_pb2.GetExecutionRequestRequest(execution_request_id=exr)
    )
    assert parked.execution_request.admission_refusal == "POLICY_EPOCH_UNRECOGNIZED"
    monkeypatch.undo()
    claimed = execution(clients).ClaimExecutionRequest(claim_request(clients, exr))
    assert claimed.execution_request.lease.generation == 1
