"""The reference worker really continues an admitted run: four real services (SQLite and
PostgreSQL), the real pinned SDK through the installed adapter, and a scripted provider over real
HTTP that keeps the bytes it received."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import grpc

from forge.continuity.v1 import common_pb2, execution_pb2, ledger_pb2
from services.demo.scripted_provider import ScriptedProvider, listing_forever, reference_script
from services.worker.run import EXIT_COMPLETED, EXIT_FAILED, EXIT_STOPPED
from shared.continuity.canonical import digest_of, sha256_digest
from tests.admission.conftest import Stack, rpc_reason
from tests.worker.conftest import COMMANDS, FIXTURE, LOG, Continuation, admit

CONSUMED_CALL = FIXTURE.tool_calls[0]["id"]  # the consumed response's read_run_evidence call


def consumed_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The assistant messages of ``body`` that are the original consumed response."""
    return [
        m
        for m in body["messages"]
        if any(c["id"] == CONSUMED_CALL for c in m.get("tool_calls") or [])
    ]


def tool_result(body: dict[str, Any], call_id: str) -> Any:
    (message,) = [m for m in body["messages"] if m.get("tool_call_id") == call_id]
    return json.loads(message["content"])


def test_the_worker_continues_the_admitted_run_to_a_certified_completion(
    admitted: Continuation, provider: ScriptedProvider
) -> None:
    before = admitted.journal()
    assert admitted.run_record().completed_rounds == 0  # admission preserved the count
    outcome = admitted.run(provider)
    assert outcome.exit_code == EXIT_COMPLETED, outcome.message

    # The provider saw six requests, each carrying the consumed response exactly once in its
    # history: none of them asks for the consumed turn again.
    bodies = provider.requests()
    assert len(bodies) == 6
    assert all(len(consumed_messages(b)) == 1 for b in bodies)
    assert tool_result(bodies[0], CONSUMED_CALL) == {"status": "invalid_query"}
    # The corrected query succeeds and reads the evidence store.
    assert tool_result(bodies[1], "call_scripted_1") == {"status": "ok", "items": LOG[:20]}
    # Two listings of the real source tree, two commands that really ran.
    assert tool_result(bodies[2], "call_scripted_2") == ["src/app.py", "src/util.py"]
    assert tool_result(bodies[3], "call_scripted_3") == ["tests/test_app.py"]
    assert [tool_result(bodies[i], f"call_scripted_{i}")["exit_code"] for i in (4, 5)] == [0, 0]
    assert (admitted.source / "ran-1").exists() and (admitted.source / "ran-2").exists()

    # The journal: the earlier entries unchanged, then the worker's own records in order.
    after = admitted.journal()
    assert [e.hash for e in after[: len(before)]] == [e.hash for e in before]
    records = admitted.after_claim()
    kinds = [kind for kind, _ in records]
    assert kinds[0] == "worker_claimed"
    assert kinds.count("model_request_sent") == kinds.count("response_consumed") == 6
    assert kinds.count("tool_call_granted") == 5
    assert kinds.count("tool_intent") == 5  # the corrected read, two listings, two commands
    assert kinds.count("command_executed") == 2
    assert kinds[-1] == "request_event"
    for sent, (_, payload) in zip(
        provider.received,
        [r for r in records if r[0] == "model_request_sent"],
        strict=True,
    ):
        assert payload["wire_digest"] == sha256_digest(sent[1])
        assert payload["wire_length"] == len(sent[1])
    # Each command was charged before it ran: its receipt follows its intent, then its outcome.
    for call_id in ("call_scripted_4", "call_scripted_5"):
        intent = kinds.index("tool_intent", [p.get("call_id") for _, p in records].index(call_id))
        assert kinds[intent + 1 : intent + 3] == ["command_executed", "tool_outcome"]

    # The original attempt, the original claim of one generation, the owner instance.
    claimed = records[0][1]
    assert claimed["attempt_id"] == admitted.run_record().attempt_id
    assert claimed["owner_instance"]["pid"] == os.getpid()
    assert claimed["owner_instance"]["host_boot_id"]

    # The command ledger: 11 -> 13 of 22, the old receipts unchanged.
    assert admitted.usage() == (13, 22)
    old = [e for e in before if e.kind == common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED]
    assert len(old) == 11 and all(e in after for e in old)

    # Both verdicts, kept apart, in the response and the journal; the round count advanced.
    completion = outcome.completion
    assert completion is not None
    assert completion.goal_claim == execution_pb2.GOAL_CLAIM_SATISFIED
    assert completion.certification.certified
    assert list(completion.certification.open_intent_call_ids) == []
    assert completion.completed_rounds == 1 == admitted.run_record().completed_rounds
    event = records[-1][1]
    assert event["event"] == "completed"
    assert event["goal_claim"] == "satisfied"
    assert event["certification"]["certified"] is True
    assert event["completed_rounds"] == 1
    assert admitted.request().state == common_pb2.EXECUTION_REQUEST_STATE_COMPLETED


def test_a_request_past_the_original_request_limit_is_refused_by_the_sdk(
    admitted: Continuation,
) -> None:
    derived = json.loads(
        admitted.stack.ledger_stub("reader-token")
        .GetBlob(
            ledger_pb2.GetBlobRequest(digest=admitted.ticket.execution_request.checkpoint_digest)
        )
        .content
    )
    limit = derived["state"]["limits"]["request_limit"]
    used = derived["state"]["usage"]["requests"]
    with ScriptedProvider(listing_forever) as provider:
        outcome = admitted.run(provider)
    assert outcome.exit_code == EXIT_FAILED, outcome.message
    assert "usage_limit_exceeded" in outcome.message
    # Exactly the remaining allowance of the original limits reached the provider.
    assert len(provider.received) == limit - used
    kinds = [kind for kind, _ in admitted.after_claim()]
    assert kinds.count("model_request_sent") == limit - used
    assert kinds[-1] == "request_failed"
    assert admitted.request().state == common_pb2.EXECUTION_REQUEST_STATE_FAILED
    assert admitted.run_record().completed_rounds == 0


def test_the_goal_claim_and_the_certification_are_kept_apart(
    admitted: Continuation, tmp_path: Path
) -> None:
    failing = (COMMANDS[0], (COMMANDS[1][0], "-c", "raise SystemExit(3)"))
    with ScriptedProvider(reference_script(failing)) as provider:
        outcome = admitted.run(provider, granted_commands=frozenset(failing))
    assert outcome.exit_code == EXIT_COMPLETED, outcome.message
    completion = outcome.completion
    assert completion is not None
    # The worker does not claim the goal (a command failed); the journal still certifies a
    # safe completion: certifiable is not done.
    assert completion.goal_claim == execution_pb2.GOAL_CLAIM_NOT_SATISFIED
    assert completion.certification.certified
    assert completion.completed_rounds == 1
    assert digest_of({"argv": list(failing[1])}) in [
        p.get("command_digest") for k, p in admitted.after_claim() if k == "command_executed"
    ]


def test_a_refused_record_command_stops_the_worker_before_the_command_runs(
    stack: Stack, tmp_path: Path, provider: ScriptedProvider
) -> None:
    admitted = admit(stack, tmp_path, commands_before=21)  # one command left of 22
    outcome = admitted.run(provider)
    assert outcome.exit_code == EXIT_STOPPED
    assert "COMMAND_LIMIT_REACHED" in outcome.message
    assert (admitted.source / "ran-1").exists()
    assert not (admitted.source / "ran-2").exists()  # refused before it ran
    assert admitted.usage() == (22, 22)
    # Nothing was written after the refusal; the request is left claimed, as the ledger has it.
    kind, payload = admitted.after_claim()[-1]
    assert (kind, payload["call_id"]) == ("tool_intent", "call_scripted_5")
    assert admitted.request().state == common_pb2.EXECUTION_REQUEST_STATE_CLAIMED
    assert len(provider.received) == 5  # no request after the refusal


def test_a_revoked_policy_stops_the_worker_at_its_next_write(
    admitted: Continuation, tmp_path: Path
) -> None:
    second: list[str] = []
    script = reference_script(COMMANDS)

    def revoking(index: int, body: dict[str, Any]) -> dict[str, Any]:
        if index == 1:
            # Meanwhile a second worker cannot claim the running request...
            try:
                admitted.execution("worker2-token").ClaimExecutionRequest(
                    execution_pb2.ClaimExecutionRequestRequest(
                        execution_request_id=admitted.ticket.execution_request.execution_request_id
                    )
                )
            except grpc.RpcError as error:
                second.append(rpc_reason(error))
            # ... and an administrator disables the policy.
            admitted.stack.set_policy(enabled=False)
        return script(index, body)

    with ScriptedProvider(revoking) as provider:
        outcome = admitted.run(provider)
    assert second == ["EXECUTION_REQUEST_NOT_QUEUED"]
    assert outcome.exit_code == EXIT_STOPPED
    assert "AppendJournalEntry: POLICY_REVOKED" in outcome.message
    # The answer to the second request was refused at its record: its listing never ran.
    kinds = [kind for kind, _ in admitted.after_claim()]
    assert kinds.count("model_request_sent") == 2
    assert kinds.count("response_consumed") == 1
    assert kinds.count("tool_intent") == 1  # only the corrected evidence read
    assert admitted.request().state == common_pb2.EXECUTION_REQUEST_STATE_CLAIMED
    assert len(provider.received) == 2
