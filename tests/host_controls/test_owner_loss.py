"""Host control of owner loss: a worker process killed mid-run leaves its request claimed until
reconciliation; the local-process verifier refuses while the owner lives and proves cessation of
exactly that process once it is gone; the retry runs to completion under a new worker, with
nothing refunded."""

from __future__ import annotations

import grpc

from forge.continuity.v1 import common_pb2, reconciliation_pb2
from services.demo.scripted_provider import ScriptedProvider, reference_script
from services.worker.run import EXIT_COMPLETED
from tests.errors import expect_error
from tests.host_controls.conftest import Gate, Workers
from tests.recovery.test_reconciliation import decision, inspect, reconciliations, verify
from tests.worker.conftest import COMMANDS, Continuation

CLAIMED = common_pb2.EXECUTION_REQUEST_STATE_CLAIMED


def test_a_killed_worker_leaves_its_request_claimed_until_its_cessation_is_proven(
    admitted: Continuation, workers: Workers, gates: list[Gate]
) -> None:
    # The worker runs the evidence read, both listings and the first command, then waits on
    # its provider for the next turn (a slow model).
    gate = Gate(reference_script(COMMANDS), at=4)
    gates.append(gate)
    with ScriptedProvider(gate) as model:
        owner = workers.start(model)
        gate.wait()
        claimed = admitted.request()
        assert claimed.state == CLAIMED and admitted.usage() == (12, 22)
        [recorded] = [p for k, p in admitted.after_claim() if k == "worker_claimed"]
        assert recorded["owner_instance"]["pid"] == owner.pid

        # While the owner lives, nothing is proven: the verifier observes the process.
        snapshot = inspect(admitted.stack, claimed)
        alive = expect_error(
            grpc.StatusCode.FAILED_PRECONDITION,
            "RECONCILIATION_NOT_VERIFIED",
            lambda: verify(admitted.stack, snapshot, evidence=f"worker pid {owner.pid}"),
        )
        assert "still running" in alive.message

        owner.kill()
        # Killing it changes nothing in the ledger: still claimed, the same snapshot.
        assert admitted.request().state == CLAIMED
        again = inspect(admitted.stack, claimed)
        assert again.reconciliation_digest == snapshot.reconciliation_digest
        proof = verify(admitted.stack, again, evidence=f"worker pid {owner.pid} killed")
        assert proof.verifier == "local-process"
        assert proof.cessation_verified and proof.exposure_within_reservation
        # every effect the killed worker intended has its outcome in the journal
        assert proof.effect == reconciliation_pb2.VERIFIED_EFFECT_NO_EFFECT
        assert f"no process {owner.pid}" in proof.detail

        settled = (
            reconciliations(admitted.stack)
            .ReconcileExecutionRequest(decision(inspect(admitted.stack, claimed)))
            .reconciliation
        )
    retry = settled.retry_request
    assert settled.reconciled_request.state == common_pb2.EXECUTION_REQUEST_STATE_RECONCILED
    assert retry.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED
    assert retry.attempt_id == claimed.attempt_id

    # A new worker process continues the retry to completion; nothing is refunded.
    with ScriptedProvider(reference_script(COMMANDS)) as model:
        finished = workers.run(model)
    assert finished.returncode == EXIT_COMPLETED, finished.stderr
    assert retry.execution_request_id in finished.message
    assert admitted.usage() == (14, 22)
    claims = [p for k, p in admitted.after_claim() if k == "worker_claimed"]
    assert claims[-1]["execution_request_id"] == retry.execution_request_id
    assert claims[-1]["owner_instance"]["pid"] != owner.pid
