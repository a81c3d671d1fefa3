"""`make demo`, part two: a continuation that failed before any worker claimed it is recovered
once, under the same request and attempt (the never-claimed failed-request recovery)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import grpc

from forge.continuity.v1 import (
    admission_pb2,
    admission_pb2_grpc,
    candidate_pb2,
    candidate_pb2_grpc,
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    ledger_pb2,
    ledger_pb2_grpc,
    policy_pb2,
    policy_pb2_grpc,
)
from services.demo.seed import load_fixture, seed_held_run
from shared.contract.channels import open_channel
from shared.runtime.errors import from_rpc_error

#: The original operator of the ticket, who also holds factory administrator authority.
ADMIN_OPERATOR = "dev-admin-operator-token"


def refused(call: Callable[[], object]) -> str:
    """The reason a call is refused with ("" when it is accepted)."""
    try:
        call()
    except grpc.RpcError as error:
        return from_rpc_error(error).reason
    return ""


class StoryStubs(NamedTuple):
    """The stubs a recovery story calls, each under the identity that story step needs."""

    writer: ledger_pb2_grpc.LedgerServiceStub
    reader: ledger_pb2_grpc.LedgerServiceStub
    policy: policy_pb2_grpc.PolicyServiceStub
    candidates: candidate_pb2_grpc.CandidateServiceStub
    admission: admission_pb2_grpc.AdmissionServiceStub
    worker: execution_pb2_grpc.ExecutionServiceStub


def worker_journal(
    targets: dict[str, str], tokens: dict[str, str]
) -> ledger_pb2_grpc.LedgerServiceStub:
    """The ledger as the worker calls it: the records naming its request are its own."""
    return ledger_pb2_grpc.LedgerServiceStub(open_channel(targets["ledger"], tokens["worker"]))


def story_stubs(targets: dict[str, str], tokens: dict[str, str]) -> StoryStubs:
    """Platform writer, reader, administrator, the administrator-operator and the worker."""
    ledger = targets["ledger"]
    return StoryStubs(
        writer=ledger_pb2_grpc.LedgerServiceStub(open_channel(ledger, tokens["writer"])),
        reader=ledger_pb2_grpc.LedgerServiceStub(open_channel(ledger, tokens["reader"])),
        policy=policy_pb2_grpc.PolicyServiceStub(open_channel(ledger, tokens["admin"])),
        candidates=candidate_pb2_grpc.CandidateServiceStub(
            open_channel(targets["candidate"], ADMIN_OPERATOR)
        ),
        admission=admission_pb2_grpc.AdmissionServiceStub(
            open_channel(targets["admission"], ADMIN_OPERATOR)
        ),
        worker=execution_pb2_grpc.ExecutionServiceStub(open_channel(ledger, tokens["worker"])),
    )


def never_claimed_story(
    targets: dict[str, str],
    run_id: str,
    tokens: dict[str, str],
    check: Callable[[bool, str], None],
    step: Callable[[str], None],
) -> None:
    writer, reader, policy, candidates, admission, _worker = story_stubs(targets, tokens)
    # Failing a request no worker claimed is the factory administrator's (ADR 0041).
    dispatcher = execution_pb2_grpc.ExecutionServiceStub(
        open_channel(targets["ledger"], tokens["admin"])
    )

    step(f"Run {run_id}: admitted by an operator who is also a factory administrator")
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
    request_id = f"{run_id}-request-1"
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
    queued = ticket.execution_request
    check(queued.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED, "the continuation is queued")

    step("The dispatcher cannot start it: the request fails before any worker claim")
    failed = dispatcher.FailUnclaimedExecutionRequest(
        execution_pb2.FailUnclaimedExecutionRequestRequest(
            execution_request_id=queued.execution_request_id, reason="dispatch_refused"
        )
    ).execution_request
    check(
        failed.state == common_pb2.EXECUTION_REQUEST_STATE_FAILED and failed.lease.generation == 0,
        "failed at generation 0, never claimed",
    )

    step("The original operator reviews the recovery candidate")
    recovery = candidates.GetInvalidReadRecoveryCandidate(
        candidate_pb2.GetInvalidReadRecoveryCandidateRequest(run_id=run_id, request_id=request_id)
    ).candidate
    for hold in recovery.holds:
        print(f"    hold {common_pb2.HoldReason.Name(hold.reason)}: {hold.detail}")
    check(recovery.eligible, "eligible: the native history proves no worker ever claimed it")
    permitted = [a.action for a in recovery.handoff.permitted_next_actions]
    check(permitted == ["request_invalid_read_recovery"], f"permitted next actions: {permitted}")

    def submit(recovery_id: str) -> admission_pb2.RequestInvalidReadRecoveryResponse:
        response: admission_pb2.RequestInvalidReadRecoveryResponse = (
            admission.RequestInvalidReadRecovery(
                admission_pb2.RequestInvalidReadRecoveryRequest(
                    run_id=run_id,
                    request_id=request_id,
                    recovery_id=recovery_id,
                    candidate_digest=recovery.candidate_digest,
                    valid_for_seconds=900,
                    acknowledge_never_claimed=True,
                    acknowledge_same_request_and_attempt=True,
                    acknowledge_budgets_charged=True,
                    acknowledge_same_attempt_lease=True,
                )
            )
        )
        return response

    step("The operator submits the recovery, and the response is lost")
    submit(f"{run_id}-recovery-1")  # the reply is discarded on purpose
    print("    (response discarded)")

    step("The operator reads the saved recovery back")
    outcome = admission.GetInvalidReadRecovery(
        admission_pb2.GetInvalidReadRecoveryRequest(run_id=run_id, request_id=request_id)
    ).outcome
    requeued = outcome.execution_request
    check(
        requeued.execution_request_id == queued.execution_request_id
        and requeued.attempt_id == queued.attempt_id
        and requeued.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED,
        "the same request and attempt are queued again",
    )
    print(f"    new lease {requeued.lease.seconds}s at generation {requeued.lease.generation}")

    step("An identical resubmit returns the saved recovery; a different action is refused")
    again = submit(f"{run_id}-recovery-1")
    check(not again.created and again.outcome == outcome, "idempotent: no second witness")
    reason = refused(lambda: submit(f"{run_id}-recovery-2"))
    check(reason == "RECOVERY_ALREADY_SPENT", "another recovery id cannot replace the witness")

    entries = reader.ReadJournal(ledger_pb2.ReadJournalRequest(run_id=run_id, page_size=1000))
    tail = [
        common_pb2.JournalEntryKind.Name(e.kind).removeprefix("JOURNAL_ENTRY_KIND_").lower()
        for e in entries.entries[-4:]
    ]
    check(
        tail == ["ownership_claim", "request_failed", "recovery_witness", "request_event"],
        "ticket, claim and failed receipt preserved; witness and request event appended",
    )
