"""`make demo`, part four: the reference worker is killed mid-run while it waits on a slow
provider; the claimed request is inspected and verified (the local-process verifier proves
nothing while the worker lives, and proves cessation of exactly that process once it is gone),
reconciled (RETRY_STAGE under a new execution request of the same attempt), a new reference
worker runs the retry to completion, and the old worker's late writes are refused.

The demo's own services and `make run` run the ledger with ``local-process``; services whose
ledger has no verifier that can observe the worker prove nothing, and the story then shows the
refusal and records the request as terminal unresolved instead.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from forge.continuity.v1 import (
    admission_pb2,
    candidate_pb2,
    common_pb2,
    execution_pb2,
    policy_pb2,
    reconciliation_pb2,
    reconciliation_pb2_grpc,
)
from services.demo.continuation import (
    COMMANDS,
    WORKER_SECONDS,
    run_reference_worker,
    start_reference_worker,
    worker_environment,
)
from services.demo.recovery_story import StoryStubs, refused, story_stubs
from services.demo.scripted_provider import HeldTurn, ScriptedProvider, reference_script
from services.demo.seed import load_fixture, seed_held_run
from shared.contract.channels import open_channel

#: The verifier the demo's own ledger is started with (as `make run`'s).
DEMO_VERIFIER = "local-process"
#: The answer the provider holds back: after the evidence read, both listings and the first
#: command, the worker waits for its next turn.
HELD_TURN = 4
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


def reconciliation_story(
    targets: dict[str, str],
    run_id: str,
    tokens: dict[str, str],
    check: Callable[[bool, str], None],
    step: Callable[[str], None],
) -> None:
    stubs = story_stubs(targets, tokens)
    admin = reconciliation_pb2_grpc.ReconciliationServiceStub(
        open_channel(targets["ledger"], tokens["admin"])
    )

    step(f"Run {run_id}: the reference worker continues it and waits on a slow provider")
    queued = _admit(stubs, run_id, f"{run_id}-request-1")
    held = HeldTurn(reference_script(COMMANDS), at=HELD_TURN, hold_seconds=WORKER_SECONDS)
    with (
        ScriptedProvider(held) as provider,
        worker_environment(targets["ledger"], tokens["worker"], provider) as env,
    ):
        process = start_reference_worker(env, run_id)
        try:
            check(held.wait(WORKER_SECONDS), f"worker {process.pid} waits for turn {HELD_TURN + 1}")
            _reconcile(
                admin,
                stubs,
                targets["ledger"],
                tokens["worker"],
                run_id,
                queued,
                process,
                check,
                step,
            )
        finally:
            held.released.set()
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=30)


def _reconcile(
    admin: reconciliation_pb2_grpc.ReconciliationServiceStub,
    stubs: StoryStubs,
    ledger_target: str,
    worker_token: str,
    run_id: str,
    queued: common_pb2.ExecutionRequest,
    process: subprocess.Popen[str],
    check: Callable[[bool, str], None],
    step: Callable[[str], None],
) -> None:
    worker = stubs.worker
    exr = queued.execution_request_id

    def stored_state() -> int:
        return int(
            worker.GetExecutionRequest(
                execution_pb2.GetExecutionRequestRequest(execution_request_id=exr)
            ).execution_request.state
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
    check(snapshot.commands.used == 12, "the worker's first command is charged: 12 of 22")
    check(
        "RETRY_STAGE" not in str(snapshot.handoff.permitted_next_actions)
        and any(
            h.reason == common_pb2.HOLD_REASON_RECONCILIATION_NOT_VERIFIED for h in snapshot.holds
        ),
        "a timeout or a missing result proves nothing: the retry is held until verified",
    )
    verification = reconciliation_pb2.VerifyReconciliationRequest(
        run_id=run_id,
        execution_request_id=exr,
        reconciliation_id=snapshot.reconciliation_id,
        reconciliation_digest=snapshot.reconciliation_digest,
        evidence_reference=f"incident: worker pid {process.pid} unresponsive",
    )
    proofs: list[reconciliation_pb2.ReconciliationVerification] = []

    def verify() -> str | None:
        return refused(lambda: proofs.append(admin.VerifyReconciliation(verification).verification))

    step("While the worker process lives, the verifier proves nothing")
    check(verify() == "RECONCILIATION_NOT_VERIFIED", f"worker {process.pid} is alive: refused")

    step(f"The worker process {process.pid} is killed (SIGKILL) while holding generation 1")
    process.kill()
    process.wait(timeout=30)
    check(
        stored_state() == common_pb2.EXECUTION_REQUEST_STATE_CLAIMED,
        "the request stays claimed: a claimed ticket is never requeued automatically",
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
                    # nothing proven: the administrator releases the claim on record (ADR 0045)
                    cessation_unproven_acknowledged=kind == MARK,
                )
            )
        )
        return response

    step("The deployment verifier checks cessation, exposure and effect again")
    verification.evidence_reference = f"incident: worker pid {process.pid} killed"
    reason = verify()
    if reason:
        check(reason == "RECONCILIATION_NOT_VERIFIED", "this ledger's verifier proves nothing")
        step(
            "Nothing is proven, so the request is recorded as terminal unresolved, the "
            "administrator acknowledging the cessation as unproven"
        )
        done = decide(MARK).reconciliation
        check(
            done.reconciled_request.state == common_pb2.EXECUTION_REQUEST_STATE_UNRESOLVED,
            "terminal unresolved, with the handoff payload; nothing retried",
        )
    else:
        proof = proofs[0]
        print(f"    {proof.verifier}: {proof.detail}")
        check(
            proof.cessation_verified
            and proof.effect == reconciliation_pb2.VERIFIED_EFFECT_NO_EFFECT,
            "cessation of exactly that process is proven; every intended effect has its outcome",
        )
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

        step("A new reference worker runs the retry to completion under the original limits")
        continued = run_reference_worker(ledger_target, worker_token, run_id)
        for line in continued.stdout.splitlines():
            print(f"    {line}")
        check(
            continued.returncode == 0 and retry.execution_request_id in continued.stdout,
            f"the retry {retry.execution_request_id} completed {continued.stderr}",
        )
        usage = worker.GetCommandUsage(execution_pb2.GetCommandUsageRequest(run_id=run_id)).usage
        check(usage.used == 14, "nothing refunded: 12 stays charged, the retry makes 14")

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
