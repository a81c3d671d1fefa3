"""Fenced worker writes racing native appends to the same run, on SQLite and PostgreSQL.

Claims, completions, failures and command charges append at the run's head + 1, as native
appends do. Two appends at one head cannot both commit: the loser's insert fails the journal's
unique constraints. These tests race real threads against a real ledger and require that the
loser is run again (never INTERNAL) and that the command limit holds exactly. Counts are bounded;
nothing here depends on how the threads are scheduled.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from forge.continuity.v1 import common_pb2, execution_pb2, ledger_pb2
from shared.continuity.canonical import digest_of
from shared.runtime.errors import from_rpc_error
from tests.ledger.admission_support import (
    claim_request,
    commit,
    commit_request,
    enable_policy,
    execution,
    seed,
)
from tests.ledger.conftest import LedgerClients
from tests.support import whole_journal

COMMAND = common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED
# The one native kind a platform writer may still append while a continuity request of the run
# is outstanding (ADR 0014, rule 3b): what races the fenced writes here.
ANNOTATION = common_pb2.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION
# How often a native appender re-reads the head after losing the race before it gives up.
APPEND_ATTEMPTS = 200


@dataclass
class Outcomes:
    """Reasons of every refused call, by thread role (thread-safe)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    refused: dict[str, list[str]] = field(default_factory=dict)

    def add(self, role: str, error: grpc.RpcError) -> str:
        reason = f"{error.code().name} {from_rpc_error(error).reason}"
        with self.lock:
            self.refused.setdefault(role, []).append(reason)
        return reason


def _native_appender(
    clients: LedgerClients,
    run_id: str,
    prefix: str,
    count: int,
    outcomes: Outcomes,
    kind: common_pb2.JournalEntryKind.ValueType = COMMAND,
) -> Callable[[], None]:
    """Append ``count`` native entries (command_executed unless ``kind`` says otherwise),
    re-reading the head when another append got there first; stop at the first refusal."""
    writer = clients.ledger()

    def append_all() -> None:
        for index in range(count):
            for _ in range(APPEND_ATTEMPTS):
                head = writer.GetRun(ledger_pb2.GetRunRequest(run_id=run_id)).head.hash
                try:
                    writer.AppendJournalEntry(
                        ledger_pb2.AppendJournalEntryRequest(
                            run_id=run_id,
                            expected_head_hash=head,
                            kind=kind,
                            payload_json=json.dumps(
                                {"command_id": f"{prefix}-{index}"}
                                if kind == COMMAND
                                else {"annotation": f"{prefix}-{index}"}
                            ),
                        )
                    )
                    break
                except grpc.RpcError as error:
                    reason = from_rpc_error(error).reason
                    if reason == "JOURNAL_HEAD_STALE":
                        continue  # the documented answer to losing the race: re-read, retry
                    outcomes.add("native", error)
                    return
            else:
                raise AssertionError(f"{prefix}-{index} lost the race {APPEND_ATTEMPTS} times")

    return append_all


def _race(*actions: Callable[[], None]) -> None:
    barrier = threading.Barrier(len(actions))
    failures: list[BaseException] = []

    def run(action: Callable[[], None]) -> None:
        barrier.wait()
        try:
            action()
        except BaseException as error:  # noqa: BLE001 - reported by the main thread below
            failures.append(error)

    threads = [threading.Thread(target=run, args=(action,)) for action in actions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def _journal(clients: LedgerClients, run_id: str) -> list[common_pb2.JournalEntry]:
    return list(whole_journal(clients.ledger("reader-token"), run_id))


def _verified(clients: LedgerClients, run_id: str) -> bool:
    answer = clients.ledger("reader-token").VerifyJournal(
        ledger_pb2.VerifyJournalRequest(run_id=run_id)
    )
    return answer.valid


def _queued(clients: LedgerClients, run_id: str, command_limit: int = 200) -> str:
    """A run with an admitted, queued execution request (its id)."""
    seeded = seed(clients, run_id, command_limit=command_limit)
    enable_policy(clients, pending_ticket_limit=50)
    ticket = commit(clients, commit_request(clients, seeded, request_id=f"req-{run_id}")).ticket
    return ticket.execution_request.execution_request_id


def test_claim_commands_and_completion_racing_native_appends_all_land(
    clients: LedgerClients,
) -> None:
    exr = _queued(clients, "run-1")
    outcomes = Outcomes()
    worker = execution(clients)
    commands = [f"worker-{index}" for index in range(8)]

    def work() -> None:
        try:
            worker.ClaimExecutionRequest(claim_request(clients, exr))
            for command_id in commands:
                worker.RecordCommand(
                    execution_pb2.RecordCommandRequest(
                        execution_request_id=exr,
                        lease_generation=1,
                        command_id=command_id,
                        command_digest=digest_of(command_id),
                    )
                )
            worker.CompleteExecutionRequest(
                execution_pb2.CompleteExecutionRequestRequest(
                    execution_request_id=exr, lease_generation=1
                )
            )
        except grpc.RpcError as error:
            outcomes.add("worker", error)

    # While the request is outstanding a native resume is refused (ADR 0014, rule 3b); the
    # platform's startup-recovery annotations still land beside the worker's writes.
    appenders = [
        _native_appender(clients, "run-1", f"native-{n}", 12, outcomes, ANNOTATION)
        for n in range(3)
    ]
    _race(work, *appenders)

    assert outcomes.refused == {}
    kinds = [entry.kind for entry in _journal(clients, "run-1")]
    assert kinds.count(common_pb2.JOURNAL_ENTRY_KIND_WORKER_CLAIMED) == 1
    assert kinds.count(common_pb2.JOURNAL_ENTRY_KIND_REQUEST_EVENT) == 1
    usage = worker.GetCommandUsage(execution_pb2.GetCommandUsageRequest(run_id="run-1")).usage
    assert usage.used == 11 + len(commands)  # seeded and the worker's
    assert kinds.count(ANNOTATION) >= 3 * 12  # every native record landed too
    assert _verified(clients, "run-1")


def test_failing_an_unclaimed_request_racing_native_appends_lands(
    clients: LedgerClients,
) -> None:
    exr = _queued(clients, "run-1")
    outcomes = Outcomes()

    def fail() -> None:
        try:
            execution(clients, "admin-token").FailUnclaimedExecutionRequest(
                execution_pb2.FailUnclaimedExecutionRequestRequest(
                    execution_request_id=exr, reason="worker pool retired"
                )
            )
        except grpc.RpcError as error:
            outcomes.add("worker", error)

    appenders = [
        _native_appender(clients, "run-1", f"native-{n}", 6, outcomes, ANNOTATION) for n in range(3)
    ]
    _race(fail, *appenders)

    assert outcomes.refused == {}
    state = (
        execution(clients, "reader-token")
        .GetExecutionRequest(execution_pb2.GetExecutionRequestRequest(execution_request_id=exr))
        .execution_request.state
    )
    assert state == common_pb2.EXECUTION_REQUEST_STATE_FAILED
    kinds = [entry.kind for entry in _journal(clients, "run-1")]
    assert kinds.count(common_pb2.JOURNAL_ENTRY_KIND_REQUEST_FAILED) == 1
    assert _verified(clients, "run-1")


# Runs raced one after another, native writers and worker threads per run. The window this guards
# (an entry committed between two statements of a charge) is narrow: several rounds make hitting
# it likely, without making the test depend on it.
LIMIT_ROUNDS = 8
NATIVE_WRITERS = 2
WORKER_THREADS = 3


def test_commands_racing_for_the_last_slots_stop_at_the_limit(
    clients: LedgerClients,
) -> None:
    """Eleven slots are left; the worker records commands from several threads at once (a
    worker running commands in parallel) while the platform appends native records, until
    refused. The limit holds exactly: 22 distinct commands, every loser refused with
    COMMAND_LIMIT_REACHED, none INTERNAL. (Native commands cannot take part: while the request
    is outstanding they are refused, ADR 0014 rule 3b.)"""
    enable_policy(clients, pending_ticket_limit=50)
    for round_ in range(LIMIT_ROUNDS):
        _race_for_the_last_slots(clients, f"run-{round_}")


def _race_for_the_last_slots(clients: LedgerClients, run_id: str) -> None:
    seeded = seed(clients, run_id)  # 11 of 22 commands used
    ticket = commit(clients, commit_request(clients, seeded, request_id=f"req-{run_id}")).ticket
    exr = ticket.execution_request.execution_request_id
    worker = execution(clients)
    worker.ClaimExecutionRequest(claim_request(clients, exr))
    outcomes = Outcomes()

    def record_until_refused(thread: int) -> Callable[[], None]:
        def record() -> None:
            for index in range(22):
                command_id = f"worker-{thread}-{index}"
                try:
                    worker.RecordCommand(
                        execution_pb2.RecordCommandRequest(
                            execution_request_id=exr,
                            lease_generation=1,
                            command_id=command_id,
                            command_digest=digest_of(command_id),
                        )
                    )
                except grpc.RpcError as error:
                    outcomes.add("worker", error)
                    return

        return record

    recorders = [record_until_refused(thread) for thread in range(WORKER_THREADS)]
    appenders = [
        _native_appender(clients, run_id, f"native-{n}", 8, outcomes, ANNOTATION)
        for n in range(NATIVE_WRITERS)
    ]
    _race(*recorders, *appenders)

    limit_reached = "RESOURCE_EXHAUSTED COMMAND_LIMIT_REACHED"
    assert outcomes.refused == {"worker": [limit_reached] * WORKER_THREADS}
    entries = _journal(clients, run_id)
    command_ids = [json.loads(e.payload_json)["command_id"] for e in entries if e.kind == COMMAND]
    assert len(command_ids) == len(set(command_ids)) == 22
    usage = worker.GetCommandUsage(execution_pb2.GetCommandUsageRequest(run_id=run_id)).usage
    assert (usage.used, usage.limit) == (22, 22)
    assert _verified(clients, run_id)
