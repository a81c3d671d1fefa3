"""Eligible held runs, the exact digests, stability, sensitivity, and read-only behaviour."""

from __future__ import annotations

import json
from datetime import timedelta

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from forge.continuity.v1 import candidate_pb2, common_pb2, ledger_pb2, policy_pb2
from services.demo.seed import load_fixture
from services.reconstruction.domain import reconstruct_invalid_read
from shared.continuity.canonical import digest_of, parse_json, sha256_digest
from tests.candidate.conftest import NOW, Candidate, Stack, actions, hold_pairs, requirements
from tests.errors import expect_error
from tests.support import whole_journal

K = common_pb2.JournalEntryKind


def _custody_digest(stack: Stack, run_id: str) -> str:
    entries = whole_journal(stack.ledger(), run_id)
    kinds = {"tool_call_granted", "tool_intent", "tool_outcome", "command_executed"}
    rows = []
    for entry in entries:
        kind = K.Name(entry.kind).removeprefix("JOURNAL_ENTRY_KIND_").lower()
        if kind in kinds:
            rows.append({"sequence": entry.sequence, "kind": kind, "hash": entry.hash})
    return digest_of(rows)


def _candidate_digest(candidate: Candidate) -> str:
    """The documented candidate digest, recomputed from the returned fields."""
    proof = candidate.proof
    return digest_of(
        {
            "kind": "forge.continuity.v1.InvalidReadContinuityCandidate",
            "run_id": candidate.run_id,
            "attempt_id": candidate.attempt_id,
            "version": candidate.version,
            "eligible": candidate.eligible,
            "run_digest": candidate.digests.run_digest,
            "journal_digest": candidate.digests.journal_digest,
            "policy_digest": candidate.digests.policy_digest,
            "policy_revision": candidate.policy_revision,
            "source_digest": candidate.source_digest,
            "custody_digest": candidate.custody_digest,
            "proof": {
                "checkpoint_digest": proof.checkpoint_digest,
                "consumed_response_digest": proof.consumed_response_digest,
                "call_id": proof.call_id,
                "query_json": proof.query_json,
                "accepted_by_advertised_schema": proof.accepted_by_advertised_schema,
                "rejected_by_pinned_validator": proof.rejected_by_pinned_validator,
                "validator_error": proof.validator_error,
                "runtime_identity": proof.runtime_identity,
                "validator_identity": proof.validator_identity,
                "derived_checkpoint_digest": proof.derived_checkpoint_digest,
                "witness_digest": proof.witness_digest,
                "consume_sequence": proof.consume_sequence,
            },
            "qualification": {
                "source_profile": candidate.qualification.source_profile,
                "qualified": candidate.qualification.qualified,
            },
            "holds": sorted([list(pair) for pair in hold_pairs(candidate)]),
        }
    )


@pytest.mark.parametrize("name", ["v1_basic", "v1_first_turn"])
def test_an_eligible_held_run_has_an_exact_proof_and_digests(stack: Stack, name: str) -> None:
    policy = stack.set_policy(enabled=True)
    seeded = stack.seed(name, "run-ok")
    fixture = load_fixture(name)

    candidate = stack.read("run-ok")

    assert candidate.eligible, hold_pairs(candidate)
    assert list(candidate.holds) == []
    assert candidate.version == 1
    assert (candidate.run_id, candidate.attempt_id) == ("run-ok", seeded.attempt_id)
    run = stack.ledger().GetRun(ledger_pb2.GetRunRequest(run_id="run-ok")).run
    # run / journal / policy digests are the ledger's own.
    assert candidate.digests.run_digest == run.run_digest
    assert candidate.digests.journal_digest == seeded.head_hash
    assert candidate.journal_head.hash == seeded.head_hash
    assert candidate.journal_head.sequence == len(seeded.entries)
    assert candidate.digests.policy_digest == policy.digest
    assert candidate.policy_revision == policy.revision
    # source and custody digests, recomputed independently.
    assert candidate.source_digest == digest_of(
        {
            "source_revision": run.source_revision,
            "configuration_digest": run.configuration_digest,
            "source_profile": run.source_profile,
        }
    )
    assert candidate.custody_digest == _custody_digest(stack, "run-ok")
    assert candidate.digests.candidate_digest == _candidate_digest(candidate)
    assert candidate.qualification == candidate_pb2.Qualification(
        source_profile=run.source_profile, qualified=True
    )

    # The proof: the one granted evidence call, accepted by the old schema, rejected by the
    # pinned validator, and the checkpoint reconstruction derives from the stored bytes.
    proof = candidate.proof
    envelope = json.loads(fixture.checkpoint)
    derived = reconstruct_invalid_read(
        fixture.checkpoint, fixture.raw_response, 1, fixture.consumed_at
    )
    evidence = next(c for c in fixture.tool_calls if c["function"]["name"] == "read_run_evidence")
    assert proof.checkpoint_digest == sha256_digest(fixture.checkpoint) == seeded.checkpoint_digest
    assert proof.consumed_response_digest == sha256_digest(fixture.raw_response)
    assert proof.call_id == evidence["id"]
    assert parse_json(proof.query_json) == json.loads(evidence["function"]["arguments"])["query"]
    assert proof.accepted_by_advertised_schema and proof.rejected_by_pinned_validator
    assert proof.validator_error
    assert proof.runtime_identity == digest_of(envelope["runtime"])
    assert proof.validator_identity == envelope["runtime"]["evidence_validator"]["source_hash"]
    assert proof.derived_checkpoint_digest == derived.derived_checkpoint_digest
    assert proof.witness_digest == derived.witness_digest
    consume = next(e for e in seeded.entries if e.kind == K.JOURNAL_ENTRY_KIND_RESPONSE_CONSUMED)
    assert proof.consume_sequence == consume.sequence

    # Handoff of an eligible candidate.
    assert actions(candidate) == ["request_invalid_read_continuity", "inspect_journal"]
    handoff = candidate.handoff
    assert list(handoff.unresolved_alternatives) == []  # the rejected read is no open effect
    resources = handoff.consumed_resources
    assert (resources.commands_used, resources.command_limit) == (11, 22)
    assert resources.model_responses_consumed == 1
    assert resources.tool_calls == len(fixture.tool_calls)
    assert resources.deadline_remaining_seconds == -1
    described = {(e.journal_sequence, e.description) for e in handoff.known_effects}
    assert (
        consume.sequence,
        f"model response {proof.consumed_response_digest} consumed for request model-request-1",
    ) in described
    assert sum("command cmd-" in d for _, d in described) == 11
    assert any(f"tool call {proof.call_id} (read_run_evidence) granted" == d for _, d in described)
    assert [o.blocked_by for o in handoff.remaining_obligations] == [""]


def test_policy_disabled_by_default_holds_with_the_policy_requirement(stack: Stack) -> None:
    stack.seed("v1_basic", "run-policy")
    candidate = stack.read("run-policy")
    assert not candidate.eligible
    assert hold_pairs(candidate) == {("POLICY_DISABLED", "enabled")}
    assert requirements(candidate) == {"POLICY_DISABLED": "POLICY"}
    assert candidate.version == 1  # the proof itself was built
    assert candidate.proof.derived_checkpoint_digest
    assert actions(candidate) == ["update_policy", "inspect_journal"]
    assert candidate.handoff.remaining_obligations[0].blocked_by == "POLICY_DISABLED"


def test_digests_are_stable_across_reads_and_server_instances(stack: Stack) -> None:
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-stable")
    first = stack.read("run-stable")
    again = stack.read("run-stable")
    with stack.another_candidate_server() as other:
        elsewhere = stack.read("run-stable", served=other)
    assert first == again == elsewhere
    assert first.eligible


def test_candidate_digest_follows_the_journal_head_and_the_policy(stack: Stack) -> None:
    stack.set_policy(enabled=True)
    seeded = stack.seed("v1_basic", "run-moves")
    before = stack.read("run-moves")

    stack.set_policy(enabled=True)  # same settings, new revision
    after_policy = stack.read("run-moves")
    assert after_policy.policy_revision == before.policy_revision + 1
    assert after_policy.digests.policy_digest != before.digests.policy_digest
    assert after_policy.digests.candidate_digest != before.digests.candidate_digest
    assert after_policy.digests.run_digest == before.digests.run_digest
    assert after_policy.digests.journal_digest == before.digests.journal_digest
    assert after_policy.eligible

    stack.writer().AppendJournalEntry(
        ledger_pb2.AppendJournalEntryRequest(
            run_id="run-moves",
            expected_head_hash=seeded.head_hash,
            kind=K.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
            payload_json=json.dumps({"annotation": "worker restarted"}),
        )
    )
    after_append = stack.read("run-moves")
    assert after_append.digests.journal_digest != after_policy.digests.journal_digest
    assert after_append.digests.candidate_digest != after_policy.digests.candidate_digest
    assert not after_append.eligible  # the run is no longer held at its head


def test_reading_candidates_writes_nothing(stack: Stack) -> None:
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-eligible")
    stack.seed("v2_list_sibling", "run-held")
    counts = stack.row_counts()
    heads = {run: stack.head(run) for run in ("run-eligible", "run-held")}
    policy = stack.policy().GetPolicy(policy_pb2.GetPolicyRequest()).policy

    for run_id in ("run-eligible", "run-held", "run-eligible", "run-held"):
        stack.read(run_id)
    expect_error(grpc.StatusCode.NOT_FOUND, "RUN_NOT_FOUND", lambda: stack.read("run-none"))

    assert stack.row_counts() == counts
    assert {run: stack.head(run) for run in heads} == heads
    assert stack.policy().GetPolicy(policy_pb2.GetPolicyRequest()).policy == policy


def test_deadline_remaining_is_reported_from_the_active_deadline(stack: Stack) -> None:
    deadline = Timestamp()
    deadline.FromDatetime(NOW + timedelta(seconds=5400))
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-deadline", active_deadline=deadline)
    candidate = stack.read("run-deadline")
    assert candidate.eligible
    assert candidate.handoff.consumed_resources.deadline_remaining_seconds == 5400


def test_unknown_run_and_missing_run_id(stack: Stack) -> None:
    expect_error(grpc.StatusCode.NOT_FOUND, "RUN_NOT_FOUND", lambda: stack.read("run-missing"))
    expect_error(grpc.StatusCode.INVALID_ARGUMENT, "FIELD_REQUIRED", lambda: stack.read(""))


def test_the_admission_service_identity_may_read_and_a_reader_may_not(stack: Stack) -> None:
    stack.seed("v1_basic", "run-roles")
    assert stack.read("run-roles", token="service-token").run_id == "run-roles"
    assert stack.read("run-roles", token="admin-token").run_id == "run-roles"
    # The candidate service itself reads the ledger; it does not ask itself for candidates.
    for token in ("reader-token", "writer-token", "worker-token", "candidate-service-token"):
        expect_error(
            grpc.StatusCode.PERMISSION_DENIED,
            "ROLE_REQUIRED",
            lambda token=token: stack.read("run-roles", token=token),  # type: ignore[misc]
        )


def test_recovery_candidates_read_the_run(stack: Stack) -> None:
    stub = stack.candidates("admin-token")
    # The never-claimed recovery candidate is delivered (tests/recovery): it reads the run.
    expect_error(
        grpc.StatusCode.NOT_FOUND,
        "RUN_NOT_FOUND",
        lambda: stub.GetInvalidReadRecoveryCandidate(
            candidate_pb2.GetInvalidReadRecoveryCandidateRequest(run_id="r", request_id="q")
        ),
    )
    # So is the rejected-boundary candidate (tests/recovery): it needs the reviewed rejection.
    expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_REQUIRED",
        lambda: stub.GetRejectedBoundaryCandidate(
            candidate_pb2.GetRejectedBoundaryCandidateRequest(run_id="r", request_id="q")
        ),
    )
    # So is the read-only observation candidate (tests/recovery).
    expect_error(
        grpc.StatusCode.NOT_FOUND,
        "RUN_NOT_FOUND",
        lambda: stub.GetReadonlyObservationCandidate(
            candidate_pb2.GetReadonlyObservationCandidateRequest(run_id="r", request_id="q")
        ),
    )
