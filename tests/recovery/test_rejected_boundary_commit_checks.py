"""The rejected-boundary recovery's pinned evidence and corrective provider configuration: judged
by admission and again inside the ledger's commit transaction; every refusal writes nothing.
Real services, SQLite and PostgreSQL."""

from __future__ import annotations

import json

import grpc
import pytest
from sqlalchemy import Engine, text

from forge.continuity.v1 import admission_pb2, candidate_pb2, common_pb2, ledger_pb2
from services.demo.provider import RefusingProvider
from shared.continuity.canonical import sha256_digest
from shared.continuity.recovery.rejected_boundary.custody import ReviewedRejection
from shared.contract.recovery_proto import reviewed_rejection_to_proto
from tests.admission.conftest import Stack
from tests.errors import expect_error
from tests.recovery.test_never_claimed import ADA, ADA_IDENTITY, holds, kinds
from tests.recovery.test_never_claimed import refused_with_nothing_written as nothing_written
from tests.recovery.test_rejected_boundary import (
    CORRECTIVE,
    CORRECTIVE_FIELDS,
    EPOCH,
    admit_enabled,
    candidate_of,
    refused_at_provider,
    report,
    review,
    store,
    submission,
)
from tests.support import as_database_owner, row_counts, whole_journal


def reviewed_and_candidate(
    stack: Stack, provider: RefusingProvider, **overrides: object
) -> tuple[ReviewedRejection, candidate_pb2.RecoveryCandidate]:
    sent = refused_at_provider(stack, admit_enabled(stack), provider)
    reviewed = review(stack, sent, **overrides)
    return reviewed, candidate_of(stack, reviewed)


def submit(
    stack: Stack,
    candidate: candidate_pb2.RecoveryCandidate,
    reviewed: ReviewedRejection,
    **overrides: object,
) -> admission_pb2.RequestRejectedBoundaryRecoveryResponse:
    return stack.admissions(ADA).RequestRejectedBoundaryRecovery(
        submission(candidate, reviewed, **overrides)
    )


def test_the_witness_records_the_corrective_configuration(
    stack: Stack, provider: RefusingProvider
) -> None:
    reviewed, candidate = reviewed_and_candidate(stack, provider)
    assert candidate.eligible, candidate.holds
    outcome = submit(stack, candidate, reviewed).outcome
    witness = whole_journal(stack.ledger_stub("reader-token"), "run-1")[
        outcome.witness_sequence - 1
    ]
    payload = json.loads(witness.payload_json)
    assert payload["workflow"] == "rejected_boundary"
    assert payload["corrective_provider"] == {
        "provider_epoch": CORRECTIVE.provider_epoch,
        "configuration_digest": CORRECTIVE.configuration_digest,
    }


def test_the_same_recovery_id_under_another_correction_is_a_conflict(
    stack: Stack, engine: Engine, provider: RefusingProvider
) -> None:
    reviewed, candidate = reviewed_and_candidate(stack, provider)
    first = submit(stack, candidate, reviewed)
    assert first.created
    other = common_pb2.CorrectiveProviderConfigurationV1(
        provider_epoch="epoch-9",
        configuration_digest=store(stack, {**CORRECTIVE_FIELDS, "provider_epoch": "epoch-9"}),
    )
    nothing_written(
        stack,
        engine,
        lambda: submit(stack, candidate, reviewed, corrective_provider=other),
        "RECOVERY_ID_CONFLICT",
    )
    assert submit(stack, candidate, reviewed).outcome == first.outcome


@pytest.mark.parametrize(
    "corrective",
    [
        None,  # missing
        common_pb2.CorrectiveProviderConfigurationV1(
            provider_epoch=EPOCH, configuration_digest=CORRECTIVE.configuration_digest
        ),  # the rejected epoch again
        common_pb2.CorrectiveProviderConfigurationV1(
            provider_epoch="epoch-8", configuration_digest="not-a-digest"
        ),
        common_pb2.CorrectiveProviderConfigurationV1(
            provider_epoch=" ", configuration_digest=CORRECTIVE.configuration_digest
        ),
    ],
)
def test_a_missing_or_malformed_corrective_configuration_is_invalid(
    stack: Stack,
    engine: Engine,
    corrective: common_pb2.CorrectiveProviderConfigurationV1,
    provider: RefusingProvider,
) -> None:
    reviewed, candidate = reviewed_and_candidate(stack, provider)
    nothing_written(
        stack,
        engine,
        lambda: submit(stack, candidate, reviewed, corrective_provider=corrective),
        "CORRECTIVE_PROVIDER_INVALID",
    )


@pytest.mark.parametrize(
    "change",
    [
        {"replaces_provider_epoch": "epoch-6"},
        {"provider_epoch": "epoch-9"},
        {"model": "another-model"},
        {"kind": "source_validator_report"},
    ],
)
def test_a_corrective_document_that_does_not_match_is_refused_at_commit(
    stack: Stack, engine: Engine, change: dict[str, object], provider: RefusingProvider
) -> None:
    reviewed, candidate = reviewed_and_candidate(stack, provider)
    corrective = common_pb2.CorrectiveProviderConfigurationV1(
        provider_epoch="epoch-8", configuration_digest=store(stack, {**CORRECTIVE_FIELDS, **change})
    )
    nothing_written(
        stack,
        engine,
        lambda: submit(stack, candidate, reviewed, corrective_provider=corrective),
        "CORRECTIVE_PROVIDER_UNVERIFIED",
    )


def test_a_corrective_document_that_is_not_stored_is_refused_at_commit(
    stack: Stack, engine: Engine, provider: RefusingProvider
) -> None:
    reviewed, candidate = reviewed_and_candidate(stack, provider)
    corrective = common_pb2.CorrectiveProviderConfigurationV1(
        provider_epoch="epoch-8", configuration_digest=sha256_digest(b"never stored")
    )
    error = nothing_written(
        stack,
        engine,
        lambda: submit(stack, candidate, reviewed, corrective_provider=corrective),
        "CORRECTIVE_PROVIDER_UNVERIFIED",
    )
    assert error.metadata["fields"] == "corrective_provider.configuration_digest"


@pytest.mark.parametrize("fact", ["source_revision", "executable_identity", "provider_epoch"])
def test_a_report_made_for_something_else_holds_the_candidate(
    stack: Stack, engine: Engine, fact: str, provider: RefusingProvider
) -> None:
    sent = refused_at_provider(stack, admit_enabled(stack), provider)
    reviewed = review(
        stack,
        sent,
        executable_probe_report_digest=report(stack, "executable_probe_report", **{fact: "other"}),
    )
    candidate = candidate_of(stack, reviewed)
    assert "REFUSAL_NOT_PROVEN" in holds(candidate)
    nothing_written(stack, engine, lambda: submit(stack, candidate, reviewed), "CANDIDATE_HELD")


def test_a_report_of_the_wrong_kind_holds_the_candidate(
    stack: Stack, provider: RefusingProvider
) -> None:
    sent = refused_at_provider(stack, admit_enabled(stack), provider)
    reviewed = review(
        stack, sent, source_validator_report_digest=report(stack, "executable_probe_report")
    )
    assert "REFUSAL_NOT_PROVEN" in holds(candidate_of(stack, reviewed))


def commit_in_ledger(
    stack: Stack, candidate: candidate_pb2.RecoveryCandidate, reviewed: ReviewedRejection
) -> ledger_pb2.CommitRecoveryResponse:
    """The ledger's commit as admission calls it after its checks passed: what changes after
    admission looked is judged by the ledger alone."""
    return stack.ledger_stub("service-token").CommitRecovery(
        ledger_pb2.CommitRecoveryRequest(
            run_id="run-1",
            request_id="req-1",
            recovery_id="rec-1",
            actor=ADA_IDENTITY,
            request_content_digest=sha256_digest(b"the submission"),
            candidate_digest=candidate.candidate_digest,
            expected_head_hash=candidate.journal_head.hash,
            policy_revision=candidate.policy_revision,
            valid_for_seconds=900,
            workflow=common_pb2.RECOVERY_WORKFLOW_REJECTED_BOUNDARY,
            reviewed_rejection=reviewed_rejection_to_proto(reviewed),
            corrective_provider=CORRECTIVE,
        )
    )


@pytest.mark.parametrize("tamper", ["delete", "change"])
@pytest.mark.parametrize(
    "field, reason",
    [
        ("source_validator_report_digest", "REVIEWED_REPORT_UNVERIFIED"),
        ("executable_probe_report_digest", "REVIEWED_REPORT_UNVERIFIED"),
        ("corrective", "CORRECTIVE_PROVIDER_UNVERIFIED"),
    ],
)
def test_evidence_missing_or_changed_at_commit_refuses_and_writes_nothing(
    stack: Stack,
    engine: Engine,
    field: str,
    reason: str,
    tamper: str,
    provider: RefusingProvider,
) -> None:
    reviewed, candidate = reviewed_and_candidate(stack, provider)
    assert candidate.eligible, candidate.holds
    digest = CORRECTIVE.configuration_digest if field == "corrective" else getattr(reviewed, field)
    with as_database_owner(engine) as connection:
        if tamper == "delete":
            connection.execute(text("DELETE FROM blobs WHERE digest = :d"), {"d": digest})
        else:
            connection.execute(
                text("UPDATE blobs SET content = :c WHERE digest = :d"),
                {"c": b'{"kind":"tampered"}', "d": digest},
            )
    before = row_counts(engine), kinds(stack)
    error = expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        reason,
        lambda: commit_in_ledger(stack, candidate, reviewed),
    )
    assert (row_counts(engine), kinds(stack)) == before
    assert error.metadata["fields"] == (
        "corrective_provider.configuration_digest" if field == "corrective" else field
    )


def test_the_ledger_commit_succeeds_with_the_evidence_intact(
    stack: Stack, provider: RefusingProvider
) -> None:
    """The control for the test above: the same direct commit, nothing tampered."""
    reviewed, candidate = reviewed_and_candidate(stack, provider)
    committed = commit_in_ledger(stack, candidate, reviewed)
    assert committed.created
    assert kinds(stack)[-3:] == ["refusal_settlement", "recovery_witness", "request_event"]
