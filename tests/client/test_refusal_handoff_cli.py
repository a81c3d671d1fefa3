"""The CLI prints the handoff a refusal of a continuation action carries (ADR 0046): what is
bound, what is known and what is permitted next, in the error lines and in ``--json``; against
the real ledger process on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import grpc
import pytest

from forge.continuity.v1 import common_pb2, execution_pb2, execution_pb2_grpc
from services.client.cli.render import handoff_lines
from shared.runtime.errors import from_rpc_error
from tests.client.conftest import CliRunner
from tests.ledger.admission_support import admitted
from tests.ledger.conftest import LedgerClients
from tests.support import Served


def test_a_refused_cancel_prints_its_handoff(cli: CliRunner, ledger_served: Served) -> None:
    _seeded, ticket = admitted(LedgerClients(ledger_served))
    exr = ticket.execution_request.execution_request_id
    argv = ("requests", "cancel", exr, "--reason", "not mine to stop")
    refused = cli(*argv, token="operator2-token", ledger=ledger_served.target)
    assert refused.code == 1
    assert refused.err.startswith("error: PERMISSION_DENIED CANCEL_NOT_PERMITTED: ")
    err = [line.strip() for line in refused.err.splitlines()]
    handoff = err[err.index("handoff:") :]
    actions = handoff[handoff.index("permitted next actions:") + 1 :]
    assert actions[0].startswith("obtain_authority: ")
    assert any(line.endswith("(blocked by CANCEL_NOT_PERMITTED)") for line in handoff)
    assert "unresolved alternatives: none" in handoff

    as_json = cli("--json", *argv, token="operator2-token", ledger=ledger_served.target)
    carried = json.loads(as_json.err)["error"]["handoff"]
    assert [b["execution_request_id"] for b in carried["bound_requests"]] == [exr]
    assert [a["action"] for a in carried["permitted_next_actions"]] == ["obtain_authority"]


def test_the_printed_handoff_is_the_one_the_status_carries(ledger_served: Served) -> None:
    """The lines are those of the carried detail, not rebuilt by the CLI."""
    clients = LedgerClients(ledger_served)
    _seeded, ticket = admitted(clients)
    stub = execution_pb2_grpc.ExecutionServiceStub(clients.channel("operator2-token"))
    with pytest.raises(grpc.RpcError) as caught:
        stub.CancelExecutionRequest(
            execution_pb2.CancelExecutionRequestRequest(
                execution_request_id=ticket.execution_request.execution_request_id, reason="x"
            )
        )
    carried = from_rpc_error(caught.value).detail(common_pb2.HandoffPayload)
    assert carried is not None
    assert "    obtain_authority: the original operator needs current authority" in handoff_lines(
        carried
    )
