"""An admission the ledger refuses at its commit, after a race the candidate could not see,
reaches the operator with the handoff the ledger read (ADR 0046): four real services on loopback,
the refusal read from the admission service's status."""

from __future__ import annotations

from dataclasses import replace

import grpc
import pytest
from grpc_status import rpc_status
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2
from services.demo.seed import load_fixture, seed_held_run
from services.ledger.service import Ledger
from services.ledger.transactions.admission import Admission
from shared.continuity.commit_admission import CommitAdmission
from shared.runtime.errors import from_rpc_error
from tests.admission.conftest import Stack, submission
from tests.support import token_roles

FIXTURE = load_fixture("v1_basic")


class RacingLedger(Ledger):
    """Before it commits ``req-2``, another operator's admission of the same consumed response
    (``req-rival``) commits: the race between the admission's candidate and its commit."""

    def commit_admission(self, request: CommitAdmission) -> Admission:
        if request.request_id == "req-2":
            rival = replace(request, request_id="req-rival", operator_identity="otto-operator")
            super().commit_admission(rival)
        return super().commit_admission(request)


@pytest.fixture
def ledger(engine: Engine) -> Ledger:
    return RacingLedger(engine, authority=token_roles)


def test_a_commit_refused_after_a_race_carries_the_ledgers_handoff(stack: Stack) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    candidate = stack.candidate_of("run-1")
    assert candidate.eligible, candidate.holds
    with pytest.raises(grpc.RpcError) as caught:
        stack.admissions().RequestInvalidReadContinuity(submission(candidate, "req-2"))
    error = from_rpc_error(caught.value)
    assert error.reason == "CONSUMED_GRAPH_ALREADY_ADMITTED"
    # the detail as any gRPC client reads it from the status
    status = rpc_status.from_call(caught.value)  # type: ignore[arg-type]
    assert status is not None
    carried = [d for d in status.details if d.Is(common_pb2.HandoffPayload.DESCRIPTOR)]
    assert len(carried) == 1, "the admission service relays the ledger's handoff once"
    handoff = common_pb2.HandoffPayload()
    carried[0].Unpack(handoff)
    (bound,) = handoff.bound_requests
    assert (bound.request_id, bound.state, bound.claimed) == ("req-rival", "queued", False)
    assert bound.execution_request_id
    assert [a.action for a in handoff.permitted_next_actions] == ["read_existing_ticket"]
    assert [o.blocked_by for o in handoff.remaining_obligations] == [
        "CONSUMED_GRAPH_ALREADY_ADMITTED"
    ]
