"""The ledger side of the reference worker, over the real services (SQLite and PostgreSQL): the
claim records a well-formed owner instance, a worker appends only its own records under the lease
it holds, and a completion with an open intent is recorded but not certified."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, execution_pb2, ledger_pb2
from tests.admission.conftest import Stack, rpc_reason
from tests.support import row_counts
from tests.worker.conftest import RUN, Continuation, admit


def claim(
    admitted: Continuation, owner: execution_pb2.OwnerInstance | None = None
) -> common_pb2.ExecutionRequest:
    run = admitted.run_record()
    return (
        admitted.execution()
        .ClaimExecutionRequest(
            execution_pb2.ClaimExecutionRequestRequest(
                execution_request_id=admitted.ticket.execution_request.execution_request_id,
                attempt_id=run.attempt_id,
                source_revision=run.source_revision,
                configuration_digest=run.configuration_digest,
                source_profile=run.source_profile,
                owner_instance=owner,
            )
        )
        .execution_request
    )


def append(
    admitted: Continuation, kind: str, payload: dict[str, object], token: str = "worker-token"
) -> common_pb2.JournalEntry:
    head = admitted.journal()[-1].hash
    return (
        admitted.stack.ledger_stub(token)
        .AppendJournalEntry(
            ledger_pb2.AppendJournalEntryRequest(
                run_id=RUN,
                expected_head_hash=head,
                kind=common_pb2.JournalEntryKind.Value(f"JOURNAL_ENTRY_KIND_{kind.upper()}"),
                payload_json=json.dumps(payload),
            )
        )
        .entry
    )


def test_a_malformed_owner_instance_is_refused_and_writes_nothing(
    stack: Stack, engine: Engine, tmp_path: Path
) -> None:
    admitted = admit(stack, tmp_path)
    before = row_counts(engine)
    for owner in (
        execution_pb2.OwnerInstance(host_boot_id="", pid=10, process_start_ticks=5),
        execution_pb2.OwnerInstance(host_boot_id="boot/1", pid=10, process_start_ticks=5),
        execution_pb2.OwnerInstance(host_boot_id="b-1\n", pid=10, process_start_ticks=5),
        execution_pb2.OwnerInstance(host_boot_id="b-1", pid=0, process_start_ticks=5),
        execution_pb2.OwnerInstance(host_boot_id="b-1", pid=10, process_start_ticks=-1),
    ):
        with pytest.raises(grpc.RpcError) as refused:
            claim(admitted, owner)
        assert rpc_reason(refused.value) == "FIELD_INVALID"
    assert row_counts(engine) == before
    owner = execution_pb2.OwnerInstance(host_boot_id="b-1", pid=10, process_start_ticks=5)
    assert claim(admitted, owner).lease.generation == 1
    recorded = json.loads(admitted.journal()[-1].payload_json)
    assert recorded["owner_instance"] == {
        "host_boot_id": "b-1",
        "pid": 10,
        "process_start_ticks": 5,
    }


def test_a_worker_appends_only_its_own_records_under_the_lease_it_holds(
    stack: Stack, engine: Engine, tmp_path: Path
) -> None:
    admitted = admit(stack, tmp_path)
    exr = admitted.ticket.execution_request.execution_request_id
    lease = {"execution_request_id": exr, "lease_generation": 1}
    intent = {"call_id": "call_1", **lease}
    before = row_counts(engine)
    refusals = []
    for kind, payload, token in (
        ("tool_intent", intent, "worker-token"),  # not claimed yet
        ("run_held", {"reason": "x", **lease}, "worker-token"),  # not a worker's record
        ("tool_intent", {"call_id": "call_1"}, "worker-token"),  # names no lease
    ):
        with pytest.raises(grpc.RpcError) as refused:
            append(admitted, kind, payload, token)
        refusals.append(rpc_reason(refused.value))
    claim(admitted)
    with pytest.raises(grpc.RpcError) as refused:
        append(admitted, "tool_intent", intent, "worker2-token")  # another worker's lease
    refusals.append(rpc_reason(refused.value))
    with pytest.raises(grpc.RpcError) as refused:
        append(admitted, "tool_intent", {**intent, "lease_generation": 2})
    refusals.append(rpc_reason(refused.value))
    assert refusals == [
        "EXECUTION_REQUEST_NOT_CLAIMED",
        "WORKER_APPEND_NOT_LEASED",
        "WORKER_APPEND_NOT_LEASED",
        "NOT_LEASE_OWNER",
        "LEASE_GENERATION_STALE",
    ]
    assert row_counts(engine)["journal_entries"] == before["journal_entries"] + 1  # the claim
    entry = append(admitted, "tool_intent", intent)
    assert entry.actor == "wanda-worker"
    # A platform writer's record naming no execution request is native, not lease-fenced (the
    # seeded runs are written that way), and refused while the request is outstanding (ADR 0014,
    # rule 3b); one naming the request is the holder's alone
    # (tests/worker/test_lease_fenced_records.py).
    native = {"call_id": "other", "status": "succeeded"}
    with pytest.raises(grpc.RpcError) as outstanding:
        append(admitted, "tool_outcome", native, "writer-token")
    assert rpc_reason(outstanding.value) == "CONTINUITY_TICKET_OUTSTANDING"


def test_a_completion_with_an_open_intent_is_recorded_but_not_certified(
    stack: Stack, tmp_path: Path
) -> None:
    admitted = admit(stack, tmp_path)
    claimed = claim(admitted)
    lease = {"execution_request_id": claimed.execution_request_id, "lease_generation": 1}
    append(admitted, "tool_intent", {"call_id": "call_open", **lease})
    append(admitted, "tool_intent", {"call_id": "call_done", **lease})
    append(admitted, "tool_outcome", {"call_id": "call_done", "status": "succeeded", **lease})
    append(admitted, "tool_intent", {"call_id": "call_failed", **lease})
    append(admitted, "tool_outcome", {"call_id": "call_failed", "status": "failed", **lease})
    completed = admitted.execution().CompleteExecutionRequest(
        execution_pb2.CompleteExecutionRequestRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=1,
            goal_claim=execution_pb2.GOAL_CLAIM_SATISFIED,
        )
    )
    # The worker claims the goal; the journal does not certify it: one effect stays open. (A
    # recorded unknown outcome refuses the completion outright: ADR 0014, rule 2c.)
    assert completed.goal_claim == execution_pb2.GOAL_CLAIM_SATISFIED
    assert not completed.certification.certified
    assert completed.certification.generation_current
    assert list(completed.certification.open_intent_call_ids) == ["call_open"]
    assert completed.completed_rounds == 0 == admitted.run_record().completed_rounds
    event = json.loads(admitted.journal()[-1].payload_json)
    assert event["goal_claim"] == "satisfied"
    assert event["certification"]["certified"] is False
    assert event["completed_rounds"] == 0
    assert completed.journal_sequence == admitted.journal()[-1].sequence
