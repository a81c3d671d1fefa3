"""Every annotated route, through a real HTTP client, against the four real services.

The story runs on HTTP stubs (tests/gateway/http_stub.py) that build each request from the
method's own http rule: the run is seeded over HTTP, the policy is put, the candidate read, the
v1 and v2 admissions submitted, workers claim, record, complete and fail, the journal is read,
streamed and verified. The recovery routes answer typed refusals from the services
themselves. The last assertion: every route was used.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from forge.continuity.v1 import (
    admission_pb2,
    audit_pb2,
    candidate_pb2,
    common_pb2,
    execution_pb2,
    inspection_pb2,
    ledger_pb2,
    policy_pb2,
    reconciliation_pb2,
)
from services.demo.seed import load_fixture, seed_held_run
from services.gateway.routes import contract_routes
from tests.gateway.conftest import RunningGateway, reason_of
from tests.gateway.http_stub import HttpRefused, HttpStub, exercised
from tests.support import whole_journal

V1 = "forge.continuity.v1."
ACKS = {
    "acknowledge_no_new_grant": True,
    "acknowledge_original_consumption": True,
    "acknowledge_renewed_same_attempt_lease": True,
}


def stub(gateway: RunningGateway, service: str, token: str) -> HttpStub:
    return HttpStub(gateway.client(token), V1 + service)


def claim_run(
    gateway: RunningGateway, run_id: str, execution_request_id: str
) -> common_pb2.ExecutionRequest:
    run = stub(gateway, "LedgerService", "reader-token").GetRun(
        ledger_pb2.GetRunRequest(run_id=run_id)
    )
    claimed: execution_pb2.ClaimExecutionRequestResponse = stub(
        gateway, "ExecutionService", "worker-token"
    ).ClaimExecutionRequest(
        execution_pb2.ClaimExecutionRequestRequest(
            execution_request_id=execution_request_id,
            source_revision=run.run.source_revision,
            configuration_digest=run.run.configuration_digest,
            source_profile=run.run.source_profile,
            attempt_id=run.run.attempt_id,
        )
    )
    return claimed.execution_request


def test_every_annotated_route_answers_through_http(gateway: RunningGateway) -> None:
    exercised.clear()
    writer = stub(gateway, "LedgerService", "writer-token")
    reader = stub(gateway, "LedgerService", "reader-token")
    policy = stub(gateway, "PolicyService", "admin-token")
    candidates = stub(gateway, "CandidateService", "operator-token")
    admission = stub(gateway, "AdmissionService", "operator-token")
    worker = stub(gateway, "ExecutionService", "worker-token")

    seeded = seed_held_run(writer, load_fixture("v1_basic"), "run-1")  # PUT run, blobs, journal
    seed_held_run(writer, load_fixture("v2_list_sibling"), "run-2")
    blob = reader.GetBlob(ledger_pb2.GetBlobRequest(digest=seeded.checkpoint_digest))
    assert blob.digest == seeded.checkpoint_digest
    assert blob.content == load_fixture("v1_basic").checkpoint  # bytes travel as base64
    [key] = reader.GetSigningKeys(audit_pb2.GetSigningKeysRequest()).keys
    assert key.current and len(key.public_key) == 32 and key.algorithm == "ed25519"
    heads = reader.ListSignedHeads(audit_pb2.ListSignedHeadsRequest(run_id="run-1")).signed_heads
    feed = reader.ListHeads(audit_pb2.ListHeadsRequest(page_size=10))
    assert feed.caught_up and "run-1" in [h.run_id for h in feed.heads]
    assert heads[-1].head_hash == seeded.head_hash and len(heads[-1].signature) == 64
    held = reader.ListRuns(ledger_pb2.ListRunsRequest(filter="state = held", page_size=1))
    assert len(held.runs) == 1 and held.next_page_token
    assert held.runs[0].continuity_state == ledger_pb2.RUN_CONTINUITY_STATE_HELD

    current = policy.GetPolicy(policy_pb2.GetPolicyRequest()).policy
    put = policy.PutPolicy(
        policy_pb2.PutPolicyRequest(
            expected_revision=current.revision,
            settings=common_pb2.PolicySettings(
                enabled=True, window_seconds=3600, allow_unavailable_source_observations=True
            ),
        )
    ).policy
    assert put.revision == current.revision + 1 and put.enabled
    revisions = policy.ListPolicyRevisions(policy_pb2.ListPolicyRevisionsRequest())
    assert [p.revision for p in revisions.policies] == [put.revision, current.revision]

    found = candidates.GetInvalidReadContinuityCandidate(
        candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id="run-1")
    ).candidate
    assert found.eligible, found.holds
    first = admission.RequestInvalidReadContinuity(
        admission_pb2.RequestInvalidReadContinuityRequest(
            run_id="run-1", request_id="req-1", digests=found.digests, version=1,
            valid_for_seconds=1800, **ACKS,
        )
    )  # fmt: skip
    assert first.created
    read_back = admission.GetInvalidReadContinuity(
        admission_pb2.GetInvalidReadContinuityRequest(run_id="run-1", request_id="req-1")
    )
    assert read_back.ticket == first.ticket
    # Who the caller is and what its roles permit: a read, decided from the enforced role tables.
    caller = admission.GetCallerPermissions(admission_pb2.GetCallerPermissionsRequest())
    assert caller.identity == "olga-operator"
    assert list(caller.roles) == [common_pb2.ROLE_EXECUTION_OPERATOR]
    decided = {p.method.rsplit("/", 1)[1]: p.permitted for p in caller.permissions}
    assert decided["RequestInvalidReadContinuity"] and decided["RequestInvalidReadContinuityV2"]
    assert not decided["RequestInvalidReadRecovery"]
    assert not decided["GetInvalidReadRecoveryCandidate"]
    # The recovery workflows the services route, described from their registry.
    workflows = admission.ListRecoveryWorkflows(admission_pb2.ListRecoveryWorkflowsRequest())
    assert [w.name for w in workflows.workflows] == [
        "never_claimed",
        "rejected_boundary",
        "readonly_observation",
    ]

    found_v2 = candidates.GetInvalidReadContinuityCandidate(
        candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id="run-2", version=2)
    ).candidate
    assert found_v2.eligible and found_v2.version == 2, found_v2.holds
    second = admission.RequestInvalidReadContinuityV2(
        admission_pb2.RequestInvalidReadContinuityV2Request(
            run_id="run-2", request_id="req-2", digests=found_v2.digests, version=2,
            valid_for_seconds=1800, acknowledge_unavailable_source_observations=True, **ACKS,
        )
    )  # fmt: skip
    assert second.created and second.ticket.version == 2

    queued = worker.ListExecutionRequests(
        execution_pb2.ListExecutionRequestsRequest(
            run_id="run-1", states=[common_pb2.EXECUTION_REQUEST_STATE_QUEUED]
        )
    ).execution_requests
    [request] = queued
    assert request == first.ticket.execution_request
    across = worker.ListAllExecutionRequests(
        execution_pb2.ListAllExecutionRequestsRequest(filter="state = queued AND run_id = run-1")
    ).execution_requests
    assert list(across) == [request]
    assert (
        worker.GetExecutionRequest(
            execution_pb2.GetExecutionRequestRequest(
                execution_request_id=request.execution_request_id
            )
        ).execution_request
        == request
    )
    claimed = claim_run(gateway, "run-1", request.execution_request_id)
    assert claimed.lease.generation == 1
    receipt = worker.RecordCommand(
        execution_pb2.RecordCommandRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=claimed.lease.generation,
            command_id="cmd-12",
            command_digest="sha256:" + "a" * 64,
        )
    )
    assert receipt.charged and receipt.usage.used == 12
    usage = worker.GetCommandUsage(execution_pb2.GetCommandUsageRequest(run_id="run-1")).usage
    assert (usage.used, usage.limit) == (12, 22)
    worker.CompleteExecutionRequest(
        execution_pb2.CompleteExecutionRequestRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=claimed.lease.generation,
        )
    )
    claimed_v2 = claim_run(gateway, "run-2", second.ticket.execution_request.execution_request_id)
    failed = worker.FailExecutionRequest(
        execution_pb2.FailExecutionRequestRequest(
            execution_request_id=claimed_v2.execution_request_id,
            lease_generation=claimed_v2.lease.generation,
            reason="WORKER_CRASHED",
        )
    ).execution_request
    assert failed.state == common_pb2.EXECUTION_REQUEST_STATE_FAILED
    # Cancel and expire: a finished request is not cancellable; nothing is due to expire.
    with pytest.raises(HttpRefused) as finished:
        stub(gateway, "ExecutionService", "admin-token").CancelExecutionRequest(
            execution_pb2.CancelExecutionRequestRequest(
                execution_request_id=failed.execution_request_id, reason="late"
            )
        )
    assert finished.value.reason == "EXECUTION_REQUEST_NOT_CANCELLABLE"
    expire = execution_pb2.ExpireExecutionRequestsRequest()
    assert list(worker.ExpireExecutionRequests(expire).expired) == []

    entries = whole_journal(reader, "run-1")
    streamed = list(reader.StreamJournal(ledger_pb2.StreamJournalRequest(run_id="run-1")))
    assert [s.entry for s in streamed] == entries
    verified = reader.VerifyJournal(ledger_pb2.VerifyJournalRequest(run_id="run-1"))
    assert verified.valid and verified.entries_checked == len(entries)
    inspected = reader.InspectJournal(inspection_pb2.InspectJournalRequest(run_id="run-1"))
    assert [e.hash for e in inspected.entries] == [e.hash for e in entries]
    assert inspected.records and inspected.credential_finding_count == 0

    # The never-claimed recovery: the claimed request is held, nothing is stored yet, and only
    # an unclaimed queued request can fail before a claim.
    with pytest.raises(HttpRefused) as not_queued:
        stub(gateway, "ExecutionService", "admin-token").FailUnclaimedExecutionRequest(
            execution_pb2.FailUnclaimedExecutionRequestRequest(
                execution_request_id=claimed.execution_request_id, reason="dispatch_refused"
            )
        )
    assert not_queued.value.reason == "EXECUTION_REQUEST_NOT_QUEUED"
    administrator = stub(gateway, "CandidateService", "admin-token")
    held = administrator.GetInvalidReadRecoveryCandidate(
        candidate_pb2.GetInvalidReadRecoveryCandidateRequest(run_id="run-1", request_id="req-1")
    ).candidate
    assert not held.eligible
    assert common_pb2.HOLD_REASON_WORKER_CLAIMED in [h.reason for h in held.holds]
    recovering = stub(gateway, "AdmissionService", "admin-token")
    with pytest.raises(HttpRefused) as unsaved:
        recovering.GetInvalidReadRecovery(
            admission_pb2.GetInvalidReadRecoveryRequest(run_id="run-1", request_id="req-1")
        )
    assert (unsaved.value.status, unsaved.value.reason) == (404, "RECOVERY_NOT_FOUND")
    with pytest.raises(HttpRefused) as held_refusal:
        recovering.RequestInvalidReadRecovery(
            admission_pb2.RequestInvalidReadRecoveryRequest(
                run_id="run-1", request_id="req-1", recovery_id="rec-1",
                candidate_digest=held.candidate_digest, valid_for_seconds=600,
                acknowledge_never_claimed=True, acknowledge_same_request_and_attempt=True,
                acknowledge_budgets_charged=True, acknowledge_same_attempt_lease=True,
            )
        )  # fmt: skip
    assert held_refusal.value.reason == "CANDIDATE_HELD"

    refusing = stub(gateway, "AdmissionService", "admin-token")
    for invoke, expected in (
        (
            lambda: stub(gateway, "CandidateService", "admin-token").GetRejectedBoundaryCandidate(
                candidate_pb2.GetRejectedBoundaryCandidateRequest(
                    run_id="run-1", request_id="req-1"
                )
            ),
            # the HTTP body maps to an empty review, refused field by field
            (400, "REVIEWED_REJECTION_INVALID"),
        ),
        (
            lambda: refusing.RequestRejectedBoundaryRecovery(
                admission_pb2.RequestRejectedBoundaryRecoveryRequest(
                    run_id="run-1", request_id="req-1", recovery_id="rec-1"
                )
            ),
            (400, "ACKNOWLEDGEMENT_REQUIRED"),
        ),
        (
            # acknowledged and reviewed, but no corrective provider configuration
            lambda: refusing.RequestRejectedBoundaryRecovery(
                admission_pb2.RequestRejectedBoundaryRecoveryRequest(
                    run_id="run-1",
                    request_id="req-1",
                    recovery_id="rec-1",
                    candidate_digest="sha256:" + "1" * 64,
                    valid_for_seconds=600,
                    reviewed_rejection=common_pb2.ReviewedProviderRejectionV1(
                        provider_epoch="epoch-1",
                        wire_digest="sha256:" + "2" * 64,
                        wire_length=10,
                        endpoint="https://provider.invalid/v1",
                        principal="svc",
                        model="m",
                        source_revision="rev",
                        executable_identity="exe",
                        source_validator_report_digest="sha256:" + "3" * 64,
                        executable_probe_report_digest="sha256:" + "4" * 64,
                    ),
                    acknowledge_reviewed_provider_epoch=True,
                    acknowledge_no_response_or_tool_replay=True,
                    acknowledge_same_request_and_budgets=True,
                    acknowledge_finite_ownership_lease=True,
                )
            ),
            (400, "CORRECTIVE_PROVIDER_INVALID"),
        ),
        (
            lambda: refusing.GetRejectedBoundaryRecovery(
                admission_pb2.GetRejectedBoundaryRecoveryRequest(run_id="run-1", request_id="req-1")
            ),
            (404, "RECOVERY_NOT_FOUND"),
        ),
    ):
        with pytest.raises(HttpRefused) as typed:
            invoke()
        assert (typed.value.status, typed.value.reason) == expected, typed.value.body

    # Reconciliation: the completed request inspects read-only; this ledger has no authority
    # source, so verification and decision fail closed (held); nothing is saved.
    reconciling = stub(gateway, "ReconciliationService", "admin-token")
    snapshot = reconciling.InspectReconciliation(
        reconciliation_pb2.InspectReconciliationRequest(
            run_id="run-1",
            execution_request_id=claimed.execution_request_id,
            reconciliation_id="rcn-1",
        )
    ).snapshot
    assert snapshot.execution_request.state == common_pb2.EXECUTION_REQUEST_STATE_COMPLETED
    assert snapshot.reconciliation_digest.startswith("sha256:")
    bodies: list[dict[str, Any]] = []
    for call, reason in (
        (
            lambda: reconciling.VerifyReconciliation(
                reconciliation_pb2.VerifyReconciliationRequest(
                    run_id="run-1", execution_request_id=claimed.execution_request_id,
                    reconciliation_id="rcn-1", evidence_reference="incident-1",
                    reconciliation_digest=snapshot.reconciliation_digest,
                )
            ),
            "RECONCILIATION_UNRESOLVED",
        ),
        (
            lambda: reconciling.ReconcileExecutionRequest(
                reconciliation_pb2.ReconcileExecutionRequestRequest(
                    run_id="run-1", execution_request_id=claimed.execution_request_id,
                    reconciliation_id="rcn-1", evidence_reference="incident-1",
                    expected_state=common_pb2.EXECUTION_REQUEST_STATE_COMPLETED,
                    expected_lease_generation=snapshot.execution_request.lease.generation,
                    decision=reconciliation_pb2.RECONCILIATION_DECISION_MARK_UNRESOLVED,
                    reconciliation_digest=snapshot.reconciliation_digest,
                )
            ),
            "RECONCILIATION_UNRESOLVED",
        ),
        (
            lambda: reconciling.GetReconciliation(
                reconciliation_pb2.GetReconciliationRequest(
                    run_id="run-1", execution_request_id=claimed.execution_request_id
                )
            ),
            "RECONCILIATION_NOT_FOUND",
        ),
    ):  # fmt: skip
        with pytest.raises(HttpRefused) as held_decision:
            call()
        assert held_decision.value.reason == reason, held_decision.value.body
        bodies.append(held_decision.value.body)
    # The decision the admissibility check refused carries its handoff in the HTTP error body
    # (a google.rpc.Status detail in the proto3 JSON mapping, like every other detail).
    (handoff,) = [
        detail
        for detail in bodies[1]["details"]
        if detail["@type"] == "type.googleapis.com/forge.continuity.v1.HandoffPayload"
    ]
    assert handoff["remaining_obligations"][0]["blocked_by"] == "REQUEST_NOT_CLAIMED"
    # a completed request: nothing is left to reconcile, so nothing is permitted
    assert handoff["permitted_next_actions"] == []
    assert handoff["bound_requests"][0]["execution_request_id"] == claimed.execution_request_id

    # The read-only observation routes reach their own RPCs: a held request (the worker's claim
    # is unresolved), a submission whose digest is stale, and no saved action yet.
    observed = (
        stub(gateway, "CandidateService", "admin-token")
        .GetReadonlyObservationCandidate(
            candidate_pb2.GetReadonlyObservationCandidateRequest(run_id="run-1", request_id="req-1")
        )
        .candidate
    )
    assert not observed.eligible
    assert common_pb2.HOLD_REASON_OBSERVATION_NOT_PROVEN in [h.reason for h in observed.holds]
    with pytest.raises(HttpRefused) as stale:
        refusing.RequestReadonlyObservationRecovery(
            admission_pb2.RequestReadonlyObservationRecoveryRequest(
                run_id="run-1", request_id="req-1", recovery_id="obs-1",
                candidate_digest="sha256:" + "5" * 64, valid_for_seconds=600,
                acknowledge_unavailable_observation=True,
                acknowledge_no_original_callback_replay=True,
                acknowledge_same_request_attempt_and_budgets=True,
                acknowledge_finite_ownership_lease=True,
            )
        )  # fmt: skip
    assert (stale.value.status, stale.value.reason) == (400, "CANDIDATE_DIGEST_STALE")
    with pytest.raises(HttpRefused) as unsaved_observation:
        refusing.GetReadonlyObservationRecovery(
            admission_pb2.GetReadonlyObservationRecoveryRequest(run_id="run-1", request_id="req-1")
        )
    assert (unsaved_observation.value.status, unsaved_observation.value.reason) == (
        404,
        "RECOVERY_NOT_FOUND",
    )

    every = {(route.http_method, route.template.text) for route in contract_routes()}
    assert exercised == every, f"routes never exercised: {sorted(every - exercised)}"


def test_the_journal_stream_is_newline_delimited_json(gateway: RunningGateway) -> None:
    seed_held_run(stub(gateway, "LedgerService", "writer-token"), load_fixture("v1_basic"), "r")
    with gateway.client("reader-token") as client:
        reply = client.get("/api/v1/runs/r/journal:stream", params={"from_sequence": "3"})
        page = client.get("/api/v1/runs/r/journal", params={"page_size": "1000"}).json()
        assert page.get("nextSequence", "0") == "0"  # the one page reached the head
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in reply.text.splitlines()]
    assert [line["entry"] for line in lines] == page["entries"][2:]
    assert lines[0]["entry"]["sequence"] == "3"  # int64 is a string in the proto3 JSON mapping


def test_the_journal_stream_batches_entries_when_asked(gateway: RunningGateway) -> None:
    seed_held_run(stub(gateway, "LedgerService", "writer-token"), load_fixture("v1_basic"), "r")
    with gateway.client("reader-token") as client:
        reply = client.get("/api/v1/runs/r/journal:stream", params={"max_entries_per_message": "2"})
        page = client.get("/api/v1/runs/r/journal", params={"page_size": "1000"}).json()
        assert page.get("nextSequence", "0") == "0"  # the one page reached the head
        negative = client.get(
            "/api/v1/runs/r/journal:stream", params={"max_entries_per_message": "-1"}
        )
    assert reply.status_code == 200, reply.text
    lines = [json.loads(line) for line in reply.text.splitlines()]
    # A page read at once, cut into messages of two: every line but the last holds two entries.
    assert [len(line["entries"]) for line in lines[:-1]] == [2] * (len(lines) - 1)
    assert [entry for line in lines for entry in line["entries"]] == page["entries"]
    assert not any("entry" in line for line in lines)
    assert negative.status_code == 400, negative.text
    assert reason_of(negative.json()) == "FIELD_INVALID"


def test_a_stream_refused_before_its_first_line_is_an_ordinary_refusal(
    gateway: RunningGateway,
) -> None:
    seed_held_run(stub(gateway, "LedgerService", "writer-token"), load_fixture("v1_basic"), "r")
    with gateway.client("reader-token") as client:
        missing = client.get("/api/v1/runs/nope/journal:stream")
        empty = client.get("/api/v1/runs/r/journal:stream", params={"from_sequence": "999"})
    assert missing.status_code == 404, missing.text
    assert missing.headers["content-type"] == "application/json"
    assert missing.json()["code"] == 5
    assert empty.status_code == 200 and empty.text == ""
