"""Host controls of a continuation that runs: the actual engine through the installed adapter,
strict evidence correction, two file-tool cycles, two durable command cycles, the unchanged
attempt and allowances, original-consumption reuse, and idempotency."""

from __future__ import annotations

import json

from forge.continuity.v1 import common_pb2, execution_pb2, ledger_pb2
from services.demo.scripted_provider import ScriptedProvider, listing_forever, reference_script
from services.worker.journaling import command_id_of
from services.worker.run import EXIT_COMPLETED, EXIT_FAILED, EXIT_NOTHING_TO_RUN
from shared.continuity.canonical import digest_of, sha256_digest
from tests.host_controls.conftest import Workers, before_answering
from tests.worker.conftest import COMMANDS, LOG, Continuation
from tests.worker.test_reference_worker import CONSUMED_CALL, consumed_messages, tool_result


def test_the_worker_process_continues_the_admitted_run_under_the_original_terms(
    admitted: Continuation, workers: Workers, provider: ScriptedProvider
) -> None:
    before = admitted.journal()
    run = admitted.run_record()
    finished = workers.run(provider)
    assert finished.returncode == EXIT_COMPLETED, finished.stderr

    # Original-consumption reuse: every request carries the consumed response exactly once in
    # its history, and none asks for that turn again (the first is already the next turn).
    bodies = provider.requests()
    assert len(bodies) == 6
    assert all(len(consumed_messages(body)) == 1 for body in bodies)
    assert tool_result(bodies[0], CONSUMED_CALL) == {"status": "invalid_query"}
    assert bodies[0]["messages"][-1]["role"] == "tool"  # answers the consumed call, asks nothing
    # Strict evidence correction: the corrected query succeeds against the evidence store.
    assert tool_result(bodies[1], "call_scripted_1") == {"status": "ok", "items": LOG[:20]}
    # Two file-tool cycles over the real tree, two durable commands that really ran.
    assert tool_result(bodies[2], "call_scripted_2") == ["src/app.py", "src/util.py"]
    assert tool_result(bodies[3], "call_scripted_3") == ["tests/test_app.py"]
    assert [tool_result(bodies[i], f"call_scripted_{i}")["exit_code"] for i in (4, 5)] == [0, 0]
    assert (admitted.source / "ran-1").exists() and (admitted.source / "ran-2").exists()

    # The journal holds exactly what the provider received, byte for byte.
    records = admitted.after_claim()
    sent = [payload for kind, payload in records if kind == "model_request_sent"]
    assert [(p["wire_digest"], p["wire_length"]) for p in sent] == [
        (sha256_digest(body), len(body)) for _, body in provider.received
    ]
    kinds = [kind for kind, _ in records]
    assert kinds.count("tool_intent") == kinds.count("tool_outcome") == 5  # every effect closed
    assert kinds.count("command_executed") == 2

    # The unchanged attempt, claimed once by this process; the command ledger 11 -> 13 of 22
    # with the old eleven receipts unchanged.
    claimed = records[0][1]
    assert claimed["attempt_id"] == run.attempt_id == admitted.run_record().attempt_id
    assert claimed["owner_instance"]["pid"] != 0
    assert admitted.usage() == (13, 22)
    old = [e for e in before if e.kind == common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED]
    after = admitted.journal()
    assert len(old) == 11 and [e.hash for e in after[: len(before)]] == [e.hash for e in before]
    assert records[-1][1]["event"] == "completed"
    assert admitted.request().state == common_pb2.EXECUTION_REQUEST_STATE_COMPLETED


def test_a_request_past_the_original_request_limit_is_refused_by_the_sdk_not_granted(
    admitted: Continuation, workers: Workers
) -> None:
    derived = json.loads(
        admitted.stack.ledger_stub("reader-token")
        .GetBlob(
            ledger_pb2.GetBlobRequest(digest=admitted.ticket.execution_request.checkpoint_digest)
        )
        .content
    )
    remaining = derived["state"]["limits"]["request_limit"] - derived["state"]["usage"]["requests"]
    with ScriptedProvider(listing_forever) as endless:
        finished = workers.run(endless)
    assert finished.returncode == EXIT_FAILED and "usage_limit_exceeded" in finished.message
    # Exactly the original remaining allowance reached the provider: the SDK refused the next.
    assert len(endless.received) == remaining
    kinds = [kind for kind, _ in admitted.after_claim()]
    assert kinds.count("model_request_sent") == remaining
    assert kinds[-1] == "request_failed"
    assert admitted.request().state == common_pb2.EXECUTION_REQUEST_STATE_FAILED


def test_a_finished_continuation_is_not_run_again_and_a_repeated_record_charges_nothing(
    admitted: Continuation, workers: Workers
) -> None:
    exr = admitted.ticket.execution_request.execution_request_id
    repeats: list[execution_pb2.RecordCommandResponse] = []

    def record_the_first_command_again() -> None:
        # the first command ran; the worker's identity records it again under its lease
        repeats.append(
            admitted.execution().RecordCommand(
                execution_pb2.RecordCommandRequest(
                    execution_request_id=exr,
                    lease_generation=1,
                    command_id=command_id_of(exr, "call_scripted_4"),
                    command_digest=digest_of({"argv": list(COMMANDS[0])}),
                )
            )
        )

    script = before_answering(reference_script(COMMANDS), {4: record_the_first_command_again})
    with ScriptedProvider(script) as model:
        assert workers.run(model).returncode == EXIT_COMPLETED
    [repeat] = repeats
    assert not repeat.charged and repeat.usage.used == 12  # the same receipt, nothing charged
    assert admitted.usage() == (13, 22)

    journal = admitted.journal()
    with ScriptedProvider(reference_script(COMMANDS)) as again:
        finished = workers.run(again)
    assert finished.returncode == EXIT_NOTHING_TO_RUN, finished.message
    assert again.received == []  # no model request, no effect, no record
    assert admitted.journal() == journal
    assert admitted.usage() == (13, 22)
