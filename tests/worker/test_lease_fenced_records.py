"""Only the lease holder writes the worker's records (issue 43), over the real services on SQLite
and PostgreSQL: a record naming a continuity execution request is refused from anyone but the
worker holding its current lease generation, and nothing is written; reconciliation and
certification count only records written under the fenced lease, and the reconciliation
snapshot shows any other record naming the request as foreign."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, execution_pb2, reconciliation_pb2
from services.ledger.domain.journal import EntryKind, seal
from services.ledger.local_process_verifier import LocalProcessVerifier
from services.ledger.repository import journal as journal_rows
from services.ledger.repository import journal_reads
from services.ledger.service import Ledger
from shared.continuity.canonical import canonical_text, sha256_digest
from shared.continuity.timeutil import to_text, utc_now
from shared.runtime.host_process import boot_id, pid_namespace, process_stat
from tests.admission.conftest import Stack
from tests.errors import expect_error
from tests.recovery.test_reconciliation import decision, inspect, reconciliations, verify
from tests.support import row_counts, token_roles
from tests.worker.conftest import RUN, Continuation, admit
from tests.worker.test_ledger_verdicts import append, claim

#: Every record the reference worker writes through AppendJournalEntry, with a payload of each.
WORKER_RECORDS: dict[str, dict[str, object]] = {
    "model_request_sent": {
        "request_id": "forged.m1",
        "checkpoint_digest": sha256_digest(b"checkpoint"),
    },
    "response_consumed": {"request_id": "forged.m1", "response_digest": sha256_digest(b"r")},
    "tool_call_granted": {"call_id": "call_cmd", "tool_name": "run_command", "grant": "command"},
    "tool_intent": {"call_id": "call_cmd", "tool_name": "run_command", "grant": "command"},
    "tool_outcome": {
        "call_id": "call_cmd",
        "status": "succeeded",
        "result_digest": sha256_digest(b"forged"),
        "exit_code": 0,
    },
}
PD, FP = grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.FAILED_PRECONDITION
CLOSING = WORKER_RECORDS["tool_outcome"]
INTENT = WORKER_RECORDS["tool_intent"]


@pytest.fixture
def ledger(engine: Engine) -> Ledger:
    """The ledger with the local-process verifier: the effect class comes from the journal."""
    return Ledger(engine, authority=token_roles, verifier=LocalProcessVerifier())


def lease_of(admitted: Continuation, generation: int = 1) -> dict[str, object]:
    exr = admitted.ticket.execution_request.execution_request_id
    return {"execution_request_id": exr, "lease_generation": generation}


def refused(
    admitted: Continuation,
    engine: Engine,
    code: grpc.StatusCode,
    reason: str,
    kind: str,
    payload: dict[str, object],
    token: str,
) -> None:
    """The append is refused with ``reason`` and writes nothing."""
    before = row_counts(engine), len(admitted.journal())
    expect_error(code, reason, lambda: append(admitted, kind, payload, token))
    assert (row_counts(engine), len(admitted.journal())) == before


def ceased_owner() -> execution_pb2.OwnerInstance:
    """The owner instance of a real process of this host that has since ceased."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    stat = process_stat(child.pid)
    child.kill()
    child.wait()
    assert stat is not None
    return execution_pb2.OwnerInstance(
        host_boot_id=boot_id(),
        pid=child.pid,
        process_start_ticks=stat.start_ticks,
        pid_namespace=pid_namespace(),
    )


def insert_predating_record(
    engine: Engine, kind: str, payload: dict[str, object], actor: str
) -> None:
    """A record stored as the ledger stored a platform writer's append before the fence: sealed
    into the chain at the head, but never checked against the lease."""
    with engine.begin() as connection:
        sequence, head = journal_reads.journal_head(connection, RUN)
        entry = seal(
            RUN,
            sequence + 1,
            EntryKind(kind),
            canonical_text(payload),
            head,
            actor,
            to_text(utc_now()),
        )
        journal_rows.insert_journal_entries(connection, [entry])


@pytest.mark.parametrize("kind", sorted(WORKER_RECORDS))
def test_a_platform_writer_cannot_write_a_claimed_requests_worker_records(
    stack: Stack, engine: Engine, tmp_path: Path, kind: str
) -> None:
    """(a) a forged ``succeeded`` outcome, and (b) each of the other four records, from an
    identity with the platform writer role naming the claimed request and its current
    generation: PERMISSION_DENIED NOT_LEASE_OWNER, nothing written."""
    admitted = admit(stack, tmp_path)
    claim(admitted)
    lease = lease_of(admitted)
    append(admitted, "tool_intent", {**INTENT, **lease})  # the holder's own intent
    refused(admitted, engine, PD, "NOT_LEASE_OWNER", kind, {**WORKER_RECORDS[kind], **lease},
            "writer-token")  # fmt: skip
    # Naming the request without a generation is not a lease-fenced record either.
    refused(admitted, engine, PD, "WORKER_APPEND_NOT_LEASED", kind,
            {**WORKER_RECORDS[kind], "execution_request_id": lease["execution_request_id"]},
            "writer-token")  # fmt: skip
    # The holder writes the same record.
    assert append(admitted, kind, {**WORKER_RECORDS[kind], **lease}).actor == "wanda-worker"


def test_a_record_under_a_stale_or_unclaimed_lease_is_refused(
    stack: Stack, engine: Engine, tmp_path: Path
) -> None:
    """(c) a record naming a generation that is not the current one is refused, whoever sends
    it; so is one naming a request nobody holds yet."""
    admitted = admit(stack, tmp_path)
    for token in ("writer-token", "worker-token"):
        refused(admitted, engine, FP, "EXECUTION_REQUEST_NOT_CLAIMED", "tool_outcome",
                {**CLOSING, **lease_of(admitted, 0)}, token)  # fmt: skip
    claim(admitted)
    for token in ("writer-token", "worker-token", "worker2-token"):
        for generation in (0, 2):
            refused(admitted, engine, FP, "LEASE_GENERATION_STALE", "tool_outcome",
                    {**CLOSING, **lease_of(admitted, generation)}, token)  # fmt: skip


def test_a_foreign_outcome_does_not_close_the_intent_for_reconciliation(
    stack: Stack, engine: Engine, tmp_path: Path
) -> None:
    """(d) the lost owner journaled a command's intent and no outcome; a ``succeeded`` outcome
    naming the request but written by someone else (a platform writer's record from before the
    fence, another worker's) is shown as foreign and closes nothing: the effect stays unknown
    and the stage is not re-run."""
    admitted = admit(stack, tmp_path)
    owned = claim(admitted, ceased_owner())
    lease = lease_of(admitted)
    append(admitted, "tool_call_granted", {**WORKER_RECORDS["tool_call_granted"], **lease})
    append(admitted, "tool_intent", {**INTENT, **lease})
    insert_predating_record(engine, "tool_outcome", {**CLOSING, **lease}, "paul-writer")
    insert_predating_record(engine, "tool_outcome", {**CLOSING, **lease}, "walt-worker")
    foreign = [(e.sequence, e.actor) for e in admitted.journal()[-2:]]

    snapshot = inspect(stack, owned)
    error = expect_error(
        FP, "RECONCILIATION_NOT_VERIFIED", lambda: verify(stack, snapshot, evidence="ceased")
    )
    assert "open intents whose effect is not known: call_cmd" in error.message
    expect_error(
        FP,
        "RECONCILIATION_UNRESOLVED",
        lambda: reconciliations(stack).ReconcileExecutionRequest(decision(snapshot)),
    )
    marked = {d.journal_sequence: d.foreign for d in snapshot.deliveries}
    assert [s for s, is_foreign in marked.items() if is_foreign] == [s for s, _ in foreign]
    assert [s for s, is_foreign in marked.items() if not is_foreign][-2:] == [
        foreign[0][0] - 2,
        foreign[0][0] - 1,
    ]
    # The holder's own outcome closes it: the effect is known, nothing open is left.
    append(admitted, "tool_outcome", {**CLOSING, **lease})
    proof = verify(stack, inspect(stack, owned), evidence="ceased")
    assert proof.effect == reconciliation_pb2.VERIFIED_EFFECT_NO_EFFECT, proof.detail


def test_only_the_holders_outcomes_certify_a_completion(
    stack: Stack, engine: Engine, tmp_path: Path
) -> None:
    """(d) certification: an outcome for the holder's intent written by someone else, one from
    before the fence naming the request, closes nothing (a platform writer's native one is
    refused meanwhile); the completion is recorded but not certified."""
    admitted = admit(stack, tmp_path)
    owned = claim(admitted)
    lease = lease_of(admitted)
    append(admitted, "tool_intent", {**INTENT, **lease})
    insert_predating_record(engine, "tool_outcome", {**CLOSING, **lease}, "paul-writer")
    # A platform writer's native record naming no request is refused while the request is
    # claimed (a native resume cannot bypass the outstanding ticket, ADR 0014 rule 3b).
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "CONTINUITY_TICKET_OUTSTANDING",
        lambda: append(admitted, "tool_outcome", CLOSING, "writer-token"),
    )
    completed = admitted.execution().CompleteExecutionRequest(
        execution_pb2.CompleteExecutionRequestRequest(
            execution_request_id=owned.execution_request_id,
            lease_generation=1,
            goal_claim=execution_pb2.GOAL_CLAIM_SATISFIED,
        )
    )
    assert not completed.certification.certified
    assert list(completed.certification.open_intent_call_ids) == ["call_cmd"]
    assert completed.completed_rounds == 0
    event = json.loads(admitted.journal()[-1].payload_json)
    assert event["certification"]["open_intent_call_ids"] == ["call_cmd"]
    assert admitted.request().state == common_pb2.EXECUTION_REQUEST_STATE_COMPLETED
