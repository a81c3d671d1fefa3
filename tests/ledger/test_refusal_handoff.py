"""Every refusal of a continuation action by the state carries the handoff of the request it was
bound to, as a ``google.rpc.Status`` detail (spec 001, ADR 0046): a worker claim, a fenced write
(a command, a worker record naming the request), a cancel and an admission commit the ledger
refuses. Read here from the status over real gRPC, as any client reads it."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, execution_pb2, ledger_pb2
from services.ledger import service_base
from services.ledger.transactions.refusal_handoff import handoff_of
from shared.continuity.canonical import digest_of
from tests.ledger.admission_support import (
    admitted,
    claim_request,
    commit,
    commit_request,
    enable_policy,
    execution,
    seed,
)
from tests.ledger.conftest import LedgerClients, counted


def refused_with_handoff(call: Callable[[], object], reason: str) -> common_pb2.HandoffPayload:
    """The handoff the refusal of ``call`` carries, read from its rich status."""
    with pytest.raises(grpc.RpcError) as caught:
        call()
    status = rpc_status.from_call(caught.value)  # type: ignore[arg-type]
    assert status is not None, "the refusal carries no rich status"
    details = {detail.type_url.rsplit("/", 1)[-1]: detail for detail in status.details}
    info = error_details_pb2.ErrorInfo()
    details["google.rpc.ErrorInfo"].Unpack(info)
    assert info.reason == reason
    assert "forge.continuity.v1.HandoffPayload" in details, f"{reason} carries no handoff"
    handoff = common_pb2.HandoffPayload()
    details["forge.continuity.v1.HandoffPayload"].Unpack(handoff)
    return handoff


def actions(handoff: common_pb2.HandoffPayload) -> set[str]:
    return {action.action for action in handoff.permitted_next_actions}


def blocked_by(handoff: common_pb2.HandoffPayload) -> str:
    return ",".join(obligation.blocked_by for obligation in handoff.remaining_obligations)


def claim(
    clients: LedgerClients, exr: str, token: str = "worker-token"
) -> common_pb2.ExecutionRequest:
    return (
        execution(clients, token)
        .ClaimExecutionRequest(claim_request(clients, exr))
        .execution_request
    )


def test_a_claim_of_a_claimed_request_hands_off_its_open_claim(clients: LedgerClients) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    claim(clients, exr)
    handoff = refused_with_handoff(
        lambda: claim(clients, exr, "worker2-token"), "EXECUTION_REQUEST_NOT_QUEUED"
    )
    (bound,) = handoff.bound_requests
    assert (bound.execution_request_id, bound.request_id) == (exr, "req-1")
    assert (bound.state, bound.claimed) == ("claimed", True)
    # the other worker's claim may have failed, committed or still be running
    assert [(u.subject, list(u.alternatives)) for u in handoff.unresolved_alternatives] == [
        (exr, ["failed", "committed", "in_flight"])
    ]
    assert actions(handoff) == {"read_execution_request", "inspect_reconciliation"}
    assert blocked_by(handoff) == "EXECUTION_REQUEST_NOT_QUEUED"
    assert any("claimed" in effect.description for effect in handoff.known_effects)
    assert handoff.consumed_resources.command_limit == 22


def test_a_claim_presenting_another_source_hands_off_the_queued_request(
    clients: LedgerClients,
) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    handoff = refused_with_handoff(
        lambda: execution(clients).ClaimExecutionRequest(
            claim_request(clients, exr, source_revision="git:0000000")
        ),
        "CLAIM_CHECK_FAILED",
    )
    (bound,) = handoff.bound_requests
    assert (bound.execution_request_id, bound.state, bound.claimed) == (exr, "queued", False)
    assert actions(handoff) == {"present_run_source"}
    assert list(handoff.unresolved_alternatives) == []


def test_a_fenced_write_of_a_lost_lease_hands_off_the_request(clients: LedgerClients) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    claimed = claim(clients, exr)

    def command(token: str, generation: int) -> object:
        return execution(clients, token).RecordCommand(
            execution_pb2.RecordCommandRequest(
                execution_request_id=exr,
                lease_generation=generation,
                command_id="cmd-1",
                command_digest=digest_of("echo"),
            )
        )

    for token, generation, reason in (
        ("worker2-token", claimed.lease.generation, "NOT_LEASE_OWNER"),
        ("worker-token", claimed.lease.generation + 1, "LEASE_GENERATION_STALE"),
    ):
        handoff = refused_with_handoff(partial(command, token, generation), reason)
        (bound,) = handoff.bound_requests
        assert (bound.execution_request_id, bound.state) == (exr, "claimed")
        assert "read_execution_request" in actions(handoff)
        assert blocked_by(handoff) == reason
    # a worker record naming the request, under a generation it does not hold
    head = clients.ledger("reader-token").GetRun(ledger_pb2.GetRunRequest(run_id="run-1")).head
    handoff = refused_with_handoff(
        lambda: clients.ledger("worker-token").AppendJournalEntry(
            ledger_pb2.AppendJournalEntryRequest(
                run_id="run-1",
                expected_head_hash=head.hash,
                kind=common_pb2.JOURNAL_ENTRY_KIND_TOOL_OUTCOME,
                payload_json=json.dumps(
                    {
                        "call_id": "call-1",
                        "status": "succeeded",
                        "execution_request_id": exr,
                        "lease_generation": claimed.lease.generation + 1,
                    }
                ),
            )
        ),
        "LEASE_GENERATION_STALE",
    )
    assert [b.execution_request_id for b in handoff.bound_requests] == [exr]
    assert "read_execution_request" in actions(handoff)


def test_a_refused_cancel_hands_off_the_request(clients: LedgerClients) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id

    def cancel(token: str) -> object:
        return execution(clients, token).CancelExecutionRequest(
            execution_pb2.CancelExecutionRequestRequest(execution_request_id=exr, reason="stop")
        )

    handoff = refused_with_handoff(lambda: cancel("operator2-token"), "CANCEL_NOT_PERMITTED")
    assert [(b.execution_request_id, b.state) for b in handoff.bound_requests] == [(exr, "queued")]
    assert actions(handoff) == {"obtain_authority"}
    claim(clients, exr)
    execution(clients).FailExecutionRequest(
        execution_pb2.FailExecutionRequestRequest(
            execution_request_id=exr, lease_generation=1, reason="gave up"
        )
    )
    handoff = refused_with_handoff(
        lambda: cancel("operator-token"), "EXECUTION_REQUEST_NOT_CANCELLABLE"
    )
    assert [(b.execution_request_id, b.state) for b in handoff.bound_requests] == [(exr, "failed")]
    assert actions(handoff) == {"read_execution_request"}


def test_a_commit_a_race_let_past_the_candidate_hands_off_what_won(
    clients: LedgerClients,
) -> None:
    """Two admissions of one consumed response reviewed on the same candidate: the ledger admits
    the first; the second's refusal is bound to the request the first queued."""
    seeded = seed(clients)
    enable_policy(clients)
    first = commit(clients, commit_request(clients, seeded, "req-1")).ticket
    handoff = refused_with_handoff(
        lambda: commit(clients, commit_request(clients, seeded, "req-2")),
        "CONSUMED_GRAPH_ALREADY_ADMITTED",
    )
    (bound,) = handoff.bound_requests
    assert (bound.request_id, bound.execution_request_id, bound.state) == (
        "req-1",
        first.execution_request.execution_request_id,
        "queued",
    )
    assert actions(handoff) == {"read_existing_ticket"}


def test_a_commit_at_a_moved_head_hands_off_the_logical_request(clients: LedgerClients) -> None:
    seeded = seed(clients)
    enable_policy(clients)
    stale = commit_request(clients, seeded, "req-1", expected_head_hash=digest_of("old head"))
    handoff = refused_with_handoff(lambda: commit(clients, stale), "JOURNAL_HEAD_STALE")
    (bound,) = handoff.bound_requests
    assert (bound.request_id, bound.execution_request_id, bound.state) == (
        "req-1",
        "",
        "unadmitted",
    )
    assert actions(handoff) == {"read_candidate"}
    assert handoff.consumed_resources.model_responses_consumed >= 1


def test_the_handoff_is_read_on_the_refusal_only(
    clients: LedgerClients, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The success path never reads a handoff: a claim, a command and a completion that succeed
    never call its reader; a refused claim reads it once, in one read transaction after its own
    rolled back (the figures: ADR 0046)."""
    reads: list[list[str]] = []

    def spied(*arguments: Any) -> common_pb2.HandoffPayload | None:
        with counted(engine) as statements:
            found = handoff_of(*arguments)
        reads.append(statements)
        return found

    monkeypatch.setattr(service_base, "handoff_of", spied)
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    claimed = claim(clients, exr)
    execution(clients).RecordCommand(
        execution_pb2.RecordCommandRequest(
            execution_request_id=exr,
            lease_generation=claimed.lease.generation,
            command_id="cmd-1",
            command_digest=digest_of("echo"),
        )
    )
    execution(clients).CompleteExecutionRequest(
        execution_pb2.CompleteExecutionRequestRequest(
            execution_request_id=exr, lease_generation=claimed.lease.generation
        )
    )
    assert reads == []
    with counted(engine) as refused, pytest.raises(grpc.RpcError):
        claim(clients, exr, "worker2-token")
    (read,) = reads
    print(f"refused claim: {len(refused)} statements, {len(read)} of them the handoff's read")
    assert 0 < len(read) < len(refused)
