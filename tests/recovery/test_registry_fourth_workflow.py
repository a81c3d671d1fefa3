"""A test-only fourth recovery workflow, registered in the recovery-workflow registry and nowhere
else, is routed end to end by the real services: its candidate RPC on the candidate service, its
submission and read-back on admission, admission's recomputation and the ledger's one commit
transaction, the witness under its own name, and the claim's authority re-check.

It proves what the never-claimed recovery proves, under its own name, number and RPCs; its RPCs
are outside the contract, so they borrow the never-claimed messages. No switchboard is edited:
the services are built while the workflow is registered.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import grpc
import pytest

from forge.continuity.v1 import (
    admission_pb2,
    candidate_pb2,
    common_pb2,
    ledger_pb2,
)
from services.admission.servicer import bindings as admission_bindings
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings as candidate_bindings
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.continuity.recovery import WORKFLOWS, Rpc, Rpcs, Workflow, registered
from shared.continuity.recovery.never_claimed.descriptor import WORKFLOW as NEVER_CLAIMED
from shared.contract.channels import open_channel
from tests.admission.conftest import Stack
from tests.recovery.test_never_claimed import ADA, ADA_IDENTITY, admit, claim, fail_unclaimed
from tests.support import admission_downstream, serve, whole_journal

PACKAGE = "forge.continuity.v1"
CANDIDATE_RPC, SUBMIT_RPC, READ_RPC = (
    "GetTestOnlyRecoveryCandidate",
    "RequestTestOnlyRecovery",
    "GetTestOnlyRecovery",
)
NUMBER = 99  # no RecoveryWorkflow value of the contract

TEST_ONLY: Workflow = dataclasses.replace(
    NEVER_CLAIMED,
    name="test_only_unclaimed",
    number=NUMBER,
    action="request_test_only_recovery",
    title="the test-only recovery",
    rpcs=Rpcs(
        candidate=Rpc(
            CANDIDATE_RPC,
            f"{PACKAGE}.GetInvalidReadRecoveryCandidateRequest",
            f"{PACKAGE}.GetInvalidReadRecoveryCandidateResponse",
        ),
        submit=Rpc(
            SUBMIT_RPC,
            f"{PACKAGE}.RequestInvalidReadRecoveryRequest",
            f"{PACKAGE}.RequestInvalidReadRecoveryResponse",
        ),
        read=Rpc(
            READ_RPC,
            f"{PACKAGE}.GetInvalidReadRecoveryRequest",
            f"{PACKAGE}.GetInvalidReadRecoveryResponse",
        ),
    ),
)


def _method(
    channel: grpc.Channel, service: str, name: str, request: type, response: type
) -> grpc.UnaryUnaryMultiCallable[object, object]:
    return channel.unary_unary(
        f"/{PACKAGE}.{service}/{name}",
        request_serializer=request.SerializeToString,  # type: ignore[attr-defined]
        response_deserializer=response.FromString,  # type: ignore[attr-defined]
    )


@pytest.fixture
def stack(ledger: Ledger) -> Iterator[Stack]:
    """The four services, built while the test-only workflow is registered."""
    with (
        registered(TEST_ONLY),
        serve(
            "ledger", ledger_bindings(ledger), max_message_bytes=32 * 1024 * 1024
        ) as ledger_served,
        serve("reconstruction", reconstruction_bindings()) as reconstruction,
    ):
        sources = GrpcCandidateSources(
            open_channel(ledger_served.target, "service-token"),
            open_channel(reconstruction.target, "candidate-service-token"),
        )
        with serve("candidate", candidate_bindings(sources)) as candidate:
            downstream = admission_downstream(ledger_served.target, candidate.target)
            # admission's stub reaches the workflow's candidate RPC like a declared one
            downstream.candidate.GetTestOnlyRecoveryCandidate = _method(  # type: ignore[attr-defined]
                open_channel(candidate.target, "service-token"),
                "CandidateService",
                CANDIDATE_RPC,
                candidate_pb2.GetInvalidReadRecoveryCandidateRequest,
                candidate_pb2.GetInvalidReadRecoveryCandidateResponse,
            )
            with serve("admission", admission_bindings(downstream)) as admission:
                yield Stack(ledger_served, candidate, admission)


def test_a_registered_fourth_workflow_is_routed_end_to_end(stack: Stack) -> None:
    ticket = admit(stack)
    fail_unclaimed(stack, ticket)

    get_candidate = _method(
        stack.candidate.channel(ADA),
        "CandidateService",
        CANDIDATE_RPC,
        candidate_pb2.GetInvalidReadRecoveryCandidateRequest,
        candidate_pb2.GetInvalidReadRecoveryCandidateResponse,
    )
    candidate = get_candidate(
        candidate_pb2.GetInvalidReadRecoveryCandidateRequest(run_id="run-1", request_id="req-1")
    ).candidate  # type: ignore[attr-defined]
    assert candidate.eligible, candidate.holds
    assert [a.action for a in candidate.handoff.permitted_next_actions] == [
        "request_test_only_recovery"
    ]

    submit = _method(
        stack.admission.channel(ADA),
        "AdmissionService",
        SUBMIT_RPC,
        admission_pb2.RequestInvalidReadRecoveryRequest,
        admission_pb2.RequestInvalidReadRecoveryResponse,
    )
    request = admission_pb2.RequestInvalidReadRecoveryRequest(
        run_id="run-1",
        request_id="req-1",
        recovery_id="rec-4",
        candidate_digest=candidate.candidate_digest,
        valid_for_seconds=900,
        **dict.fromkeys(TEST_ONLY.acknowledgements, True),  # type: ignore[arg-type]
    )
    submitted = submit(request)
    outcome = submitted.outcome  # type: ignore[attr-defined]
    assert submitted.created  # type: ignore[attr-defined]
    assert (outcome.workflow, outcome.recovery_id, outcome.actor) == (
        NUMBER,
        "rec-4",
        ADA_IDENTITY,
    )
    assert outcome.execution_request.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED

    # the ledger's one transaction wrote the witness under the workflow's own name
    entries = whole_journal(stack.ledger_stub("reader-token"), "run-1")
    witness = next(e for e in entries if e.sequence == outcome.witness_sequence)
    assert witness.kind == common_pb2.JOURNAL_ENTRY_KIND_RECOVERY_WITNESS
    assert json.loads(witness.payload_json)["workflow"] == "test_only_unclaimed"

    # read back through admission and the ledger; an identical repeat replays
    read = _method(
        stack.admission.channel("reader-token"),
        "AdmissionService",
        READ_RPC,
        admission_pb2.GetInvalidReadRecoveryRequest,
        admission_pb2.GetInvalidReadRecoveryResponse,
    )
    saved = read(
        admission_pb2.GetInvalidReadRecoveryRequest(run_id="run-1", request_id="req-1")
    ).outcome  # type: ignore[attr-defined]
    assert saved.recovery_id == "rec-4"
    stored = (
        stack.ledger_stub("reader-token")
        .GetRecovery(
            ledger_pb2.GetRecoveryRequest(run_id="run-1", request_id="req-1", workflow=NUMBER)  # type: ignore[arg-type]
        )
        .recovery
    )
    assert stored.workflow == NUMBER and stored.witness_sequence == outcome.witness_sequence
    assert not submit(request).created  # type: ignore[attr-defined]

    # the claim asks the workflow's roles of its actor again (11.5c) and succeeds
    claimed = claim(stack, ticket)
    assert claimed.execution_request.lease.generation == 1

    # the never-claimed workflow's own action on the same request stays unspent
    never_claimed = (
        stack.candidates(ADA)
        .GetInvalidReadRecoveryCandidate(
            candidate_pb2.GetInvalidReadRecoveryCandidateRequest(run_id="run-1", request_id="req-1")
        )
        .candidate
    )
    assert "RECOVERY_SPENT" not in {
        common_pb2.HoldReason.Name(h.reason).removeprefix("HOLD_REASON_")
        for h in never_claimed.holds
    }


def test_the_workflow_is_gone_once_its_block_ends() -> None:
    with registered(TEST_ONLY):
        assert WORKFLOWS["test_only_unclaimed"] is TEST_ONLY
    assert "test_only_unclaimed" not in WORKFLOWS
