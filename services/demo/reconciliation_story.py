"""`make demo`, part four: a worker is killed mid-lease; the claimed request is inspected, verified
and reconciled (RETRY_STAGE under a new execution request of the same attempt), a new worker
claims the retry, and the old worker's late writes are refused.

The demo's own services run with ``services.demo.verifier:LocalProcessVerifier``; services that
run without a deployment verifier prove nothing, and the story then shows the refusal and records
the request as terminal unresolved instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from forge.continuity.v1 import (
    admission_pb2,
    candidate_pb2,
    common_pb2,
    execution_pb2,
    ledger_pb2,
    policy_pb2,
    reconciliation_pb2,
    reconciliation_pb2_grpc,
)
from services.demo.recovery_story import StoryStubs, refused, story_stubs
from services.demo.seed import load_fixture, seed_held_run
from shared.runtime.client import open_channel

ROOT = Path(__file__).resolve().parents[2]
#: The verifier the demo's own ledger is started with.
DEMO_VERIFIER = "services.demo.verifier:LocalProcessVerifier"
RETRY = reconciliation_pb2.RECONCILIATION_DECISION_RETRY_STAGE
MARK = reconciliation_pb2.RECONCILIATION_DECISION_MARK_UNRESOLVED


def _admit(stubs: StoryStubs, run_id: str, request_id: str) -> common_pb2.ExecutionRequest:
    writer, _reader, policy, candidates, admission, _worker = stubs
    seed_held_run(writer, load_fixture("v1_basic"), run_id)
    current = policy.GetPolicy(policy_pb2.GetPolicyRequest()).policy
    if not current.enabled:
        policy.PutPolicy(
            policy_pb2.PutPolicyRequest(
                expected_revision=current.revision,
                settings=common_pb2.PolicySettings(enabled=True, window_seconds=3600),
            )
        )
    candidate = candidates.GetInvalidReadContinuityCandidate(
        candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_id)
    ).candidate
    ticket = admission.RequestInvalidReadContinuity(
        admission_pb2.RequestInvalidReadContinuityRequest(
            run_id=run_id,
            request_id=request_id,
            digests=candidate.digests,
            version=1,
            valid_for_seconds=1800,
            acknowledge_no_new_grant=True,
            acknowledge_original_consumption=True,
            acknowledge_renewed_same_attempt_lease=True,
        )
    ).ticket
    queued: common_pb2.ExecutionRequest = ticket.execution_request
    return queued


def _worker_process(
    targets: dict[str, str], tokens: dict[str, str], run_id: str, exr: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "services.demo.worker",
            "--ledger",
            targets["ledger"],
            "--token",
            tokens["worker"],
            "--reader-token",
            tokens["reader"],
            "--run-id",
            run_id,
            "--execution-request-id",
            exr,
            "--command-id",
            f"{run_id}-build",
        ],
        cwd=ROOT,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        text=True,
    )


def reconciliation_story(
    targets: dict[str, str],
    run_id: str,
    tokens: dict[str, str],
    check: Callable[[bool, str], None],
    step: Callable[[str], None],
) -> None:
    stubs = story_stubs(targets, tokens)
    reader, worker = stubs.reader, stubs.worker
    admin = reconciliation_pb2_grpc.ReconciliationServiceStub(
        open_channel(targets["ledger"], tokens["admin"])
    )

    step(f"Run {run_id}: a worker process claims the continuation and is killed mid-lease")
    queued = _admit(stubs, run_id, f"{run_id}-request-1")
    exr = queued.execution_request_id
    process = _worker_process(targets, tokens, run_id, exr)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    check(line == "claimed generation 1", f"worker {process.pid}: {line}")
    process.kill()
    process.wait(timeout=30)
    print(f"    worker process {process.pid} killed (SIGKILL) while holding generation 1")
    stored = worker.GetExecutionRequest(
        execution_pb2.GetExecutionRequestRequest(execution_request_id=exr)
    ).execution_request
    check(
        stored.state == common_pb2.EXECUTION_REQUEST_STATE_CLAIMED,
        "the request stays claimed: a claimed ticket is never requeued automatically",
    )

    step("The administrator inspects the claimed request (read-only)")
    snapshot = admin.InspectReconciliation(
        reconciliation_pb2.InspectReconciliationRequest(
            run_id=run_id, execution_request_id=exr, reconciliation_id=f"{run_id}-rcn-1"
        )
    ).snapshot
    print(
        f"    claims {[c.lease_generation for c in snapshot.claims]}, commands "
        f"{snapshot.commands.used} of {snapshot.commands.limit}, "
        f"digest {snapshot.reconciliation_digest[:19]}…"
    )
    for hold in snapshot.holds:
        print(f"    hold {common_pb2.HoldReason.Name(hold.reason)}: {hold.detail}")
    check(snapshot.commands.used == 12, "the killed worker's command is charged: 12 of 22")
    check(
        "RETRY_STAGE" not in str(snapshot.handoff.permitted_next_actions)
        and any(
            h.reason == common_pb2.HOLD_REASON_RECONCILIATION_NOT_VERIFIED for h in snapshot.holds
        ),
        "a timeout or a missing result proves nothing: the retry is held until verified",
    )

    def decide(kind: int) -> reconciliation_pb2.ReconcileExecutionRequestResponse:
        response: reconciliation_pb2.ReconcileExecutionRequestResponse = (
            admin.ReconcileExecutionRequest(
                reconciliation_pb2.ReconcileExecutionRequestRequest(
                    run_id=run_id,
                    execution_request_id=exr,
                    reconciliation_id=snapshot.reconciliation_id,
                    expected_state=snapshot.execution_request.state,
                    expected_lease_generation=snapshot.execution_request.lease.generation,
                    evidence_reference=f"incident: worker pid {process.pid} killed",
                    decision=kind,  # type: ignore[arg-type]
                    reconciliation_digest=snapshot.reconciliation_digest,
                )
            )
        )
        return response

    step("The deployment verifier checks cessation, exposure and effect")
    verification = reconciliation_pb2.VerifyReconciliationRequest(
        run_id=run_id,
        execution_request_id=exr,
        reconciliation_id=snapshot.reconciliation_id,
        reconciliation_digest=snapshot.reconciliation_digest,
        evidence_reference=f"local-pid:{process.pid};idempotent={run_id}-build",
    )
    proofs: list[reconciliation_pb2.ReconciliationVerification] = []
    reason = refused(lambda: proofs.append(admin.VerifyReconciliation(verification).verification))
    if reason:
        check(reason == "RECONCILIATION_NOT_VERIFIED", "these services have no verifier: refused")
        step("Nothing is proven, so the request is recorded as terminal unresolved")
        done = decide(MARK).reconciliation
        check(
            done.reconciled_request.state == common_pb2.EXECUTION_REQUEST_STATE_UNRESOLVED,
            "terminal unresolved, with the handoff payload; nothing retried",
        )
    else:
        proof = proofs[0]
        print(f"    {proof.verifier}: {proof.detail}")
        step("The administrator reconciles: RETRY_STAGE")
        done = decide(RETRY).reconciliation
        retry = done.retry_request
        check(
            done.reconciled_request.state == common_pb2.EXECUTION_REQUEST_STATE_RECONCILED
            and retry.attempt_id == queued.attempt_id
            and retry.execution_request_id != exr,
            "the old claim is released and fenced; a new execution request, same attempt",
        )
        again = decide(RETRY)
        check(not again.created, "an identical repeat reads the saved decision back")

        step("A new worker claims the retry and runs under the original limits")
        run = reader.GetRun(ledger_pb2.GetRunRequest(run_id=run_id)).run
        fresh = worker.ClaimExecutionRequest(
            execution_pb2.ClaimExecutionRequestRequest(
                execution_request_id=retry.execution_request_id,
                attempt_id=run.attempt_id,
                source_revision=run.source_revision,
                configuration_digest=run.configuration_digest,
                source_profile=run.source_profile,
            )
        ).execution_request
        receipt = worker.RecordCommand(
            execution_pb2.RecordCommandRequest(
                execution_request_id=fresh.execution_request_id,
                lease_generation=fresh.lease.generation,
                command_id=f"{run_id}-build-retry",
                command_digest=snapshot.reconciliation_digest,
            )
        )
        check(receipt.usage.used == 13, "nothing refunded: 12 stays charged, the retry makes 13")

    step("The old worker's late writes are refused")
    for what, call in (
        (
            "Complete",
            lambda: worker.CompleteExecutionRequest(
                execution_pb2.CompleteExecutionRequestRequest(
                    execution_request_id=exr, lease_generation=1
                )
            ),
        ),
        (
            "RecordCommand",
            lambda: worker.RecordCommand(
                execution_pb2.RecordCommandRequest(
                    execution_request_id=exr,
                    lease_generation=1,
                    command_id=f"{run_id}-late",
                    command_digest=snapshot.reconciliation_digest,
                )
            ),
        ),
    ):
        check(
            refused(call) == "LEASE_FENCED_BY_RECONCILIATION",
            f"late {what} under generation 1: LEASE_FENCED_BY_RECONCILIATION",
        )
    read = admin.GetReconciliation(
        reconciliation_pb2.GetReconciliationRequest(run_id=run_id, execution_request_id=exr)
    ).reconciliation
    check(
        (read.reconciliation_id, read.settlement_sequence, read.handoff)
        == (done.reconciliation_id, done.settlement_sequence, done.handoff),
        "the saved decision reads back unchanged",
    )
