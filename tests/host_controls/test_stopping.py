"""Host controls of a worker an operator can stop and leave running (ADR 0039): SIGTERM/SIGINT
start no new effect, let the effect under way finish within the grace or abandon it (its intent
stays open for reconciliation), record why the worker stopped and exit with EXIT_INTERRUPTED
within a bound; the lease bounds every effect, so a command's timeout is cut to what is left of
it and no effect starts too near its end. Real worker processes, SQLite and PostgreSQL."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest

from forge.continuity.v1 import common_pb2
from services.demo.scripted_provider import ScriptedProvider, reference_script
from services.worker import config as settings
from services.worker.run import EXIT_FAILED, EXIT_INTERRUPTED
from tests.admission.conftest import Stack
from tests.host_controls.conftest import Gate, Workers, variants
from tests.worker.conftest import Continuation, admit

FAILED = common_pb2.EXECUTION_REQUEST_STATE_FAILED
#: Generous: the grace (1 s) plus one failure report, on a loaded host.
STOP_BOUND_SECONDS = 30


def slow_commands(seconds: float) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A first command that marks its start, then sleeps ``seconds``; a second one that must
    never run after a stop."""
    first = f"open('started', 'w').close(); import time; time.sleep({seconds}); open('done', 'w')"
    return (sys.executable, "-c", first), (sys.executable, "-c", "open('ran-2', 'w').close()")


def wait_for(path: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


def started(stack: Stack, tmp_path: Path, commands: tuple[tuple[str, ...], ...]) -> Continuation:
    return admit(stack, tmp_path, granted=commands)


def call_records(continuation: Continuation) -> dict[str, list[str]]:
    """call ids by record kind, after the claim."""
    kinds: dict[str, list[str]] = {}
    for kind, payload in continuation.after_claim():
        kinds.setdefault(kind, []).append(str(payload.get("call_id", "")))
    return kinds


@pytest.mark.parametrize(
    ("signal_number", "grace", "command_seconds"),
    variants(
        # the command outlives the grace: killed, abandoned, its intent left open
        (signal.SIGTERM, 1.0, 120.0),
        # the command ends within the grace: finished, its outcome recorded
        (signal.SIGINT, 60.0, 2.0),
    ),
)
def test_a_signal_during_a_command_starts_nothing_new_and_records_why(
    stack: Stack, tmp_path: Path, signal_number: int, grace: float, command_seconds: float
) -> None:
    commands = slow_commands(command_seconds)
    continuation = started(stack, tmp_path, commands)
    workers = Workers(continuation)
    try:
        with ScriptedProvider(reference_script(commands)) as model:
            worker = workers.start(
                model,
                env={
                    settings.STOP_GRACE: str(grace),
                    settings.GRANTED_COMMANDS: json.dumps([list(c) for c in commands]),
                },
            )
            wait_for(continuation.source / "started")
            signalled = time.monotonic()
            worker.popen.send_signal(signal_number)
            finished = worker.finish(timeout=STOP_BOUND_SECONDS + command_seconds)
            took = time.monotonic() - signalled
    finally:
        workers.stop_all()
    name = signal.Signals(signal_number).name
    assert finished.returncode == EXIT_INTERRUPTED, finished.stdout + finished.stderr
    assert f"stopped by {name}" in finished.message
    assert took < STOP_BOUND_SECONDS + min(grace, command_seconds)
    # why it stopped is recorded: the failure report names the signal
    assert continuation.request().state == FAILED
    [failed] = [p for k, p in continuation.after_claim() if k == "request_failed"]
    assert failed["reason"] == f"worker_stopped_by_{name.lower()}"
    records = call_records(continuation)
    command_call = "call_scripted_4"
    assert command_call in records["tool_intent"]
    # nothing new started after the signal: one model request after the command's, none more,
    # and the second command was never recorded nor run
    assert "call_scripted_5" not in records.get("tool_intent", [])
    assert len(records["model_request_sent"]) == 4
    assert not (continuation.source / "ran-2").exists()
    finished_in_grace = command_seconds < grace
    assert (continuation.source / "done").exists() == finished_in_grace
    # finished: its outcome is recorded; abandoned: its intent stays open for reconciliation
    assert (command_call in records.get("tool_outcome", [])) == finished_in_grace


def test_a_signal_while_the_model_answers_abandons_the_request_after_the_grace(
    admitted: Continuation, workers: Workers, gates: list[Gate]
) -> None:
    gate = Gate(reference_script(), at=1)  # the provider holds its second answer
    gates.append(gate)
    with ScriptedProvider(gate) as model:
        worker = workers.start(model, env={settings.STOP_GRACE: "1"})
        gate.wait()
        signalled = time.monotonic()
        worker.popen.send_signal(signal.SIGTERM)
        finished = worker.finish(timeout=STOP_BOUND_SECONDS * 2)
        took = time.monotonic() - signalled
    assert finished.returncode == EXIT_INTERRUPTED, finished.stdout + finished.stderr
    assert took < STOP_BOUND_SECONDS
    records = call_records(admitted)
    # the second request was sent and never consumed; nothing after it
    assert len(records["model_request_sent"]) == 2
    assert len(records["response_consumed"]) == 1
    assert records["request_failed"] == [""]


def test_the_lease_cuts_a_commands_timeout_and_no_effect_starts_at_its_end(
    stack: Stack, tmp_path: Path
) -> None:
    # A lease of 60 s (the policy window, counted from the admission: room for a slow start on
    # a loaded host) and a command of 240 s, whose own timeout is 300 s: the command is killed
    # when the lease, less its margin, runs out; then too little is left for the next model
    # request, which is never sent, and the worker reports the failure.
    commands = slow_commands(240)
    continuation = admit(stack, tmp_path, granted=commands, window_seconds=60)
    workers = Workers(continuation)
    try:
        with ScriptedProvider(reference_script(commands)) as model:
            worker = workers.start(
                model, env={settings.GRANTED_COMMANDS: json.dumps([list(c) for c in commands])}
            )
            finished = worker.finish(timeout=150)
    finally:
        workers.stop_all()
    assert finished.returncode == EXIT_FAILED, finished.stdout + finished.stderr
    assert "lease_exhausted" in finished.message
    assert (continuation.source / "started").exists()
    assert not (continuation.source / "done").exists()
    outcomes = [p for k, p in continuation.after_claim() if k == "tool_outcome"]
    assert outcomes[-1]["call_id"] == "call_scripted_4"
    assert outcomes[-1]["status"] == "failed" and outcomes[-1]["error"] == "TimeoutExpired"
    records = call_records(continuation)
    assert len(records["model_request_sent"]) == 4  # none after the command's
    [failed] = [p for k, p in continuation.after_claim() if k == "request_failed"]
    assert failed["reason"] == "lease_exhausted"
    assert continuation.request().state == FAILED
