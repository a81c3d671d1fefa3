"""Host control of a fleet (ADR 0039): three reference worker processes in fleet mode
(``--all-runs``), each restarted by its supervisor after every request it ends, drain twenty
admitted runs: each picks the oldest eligible queued request of any run, the claim being
exclusive a worker that loses a race moves on, and every request ends completed exactly once —
one claim, two commands charged once, one completion. SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from forge.continuity.v1 import common_pb2, execution_pb2
from services.demo.scripted_provider import Message, ScriptedProvider, reference_script
from services.demo.seed import seed_held_run
from services.worker.run import EXIT_COMPLETED, EXIT_NOTHING_TO_RUN
from services.worker.source import source_revision
from tests.admission.conftest import submission
from tests.host_controls.conftest import FULL, Finished, Workers
from tests.support import whole_journal
from tests.worker.conftest import COMMANDS, FIXTURE, RUN, Continuation, kind_name

#: ``make host-controls``: three workers over twenty runs; ``make test``'s slice: two over four.
WORKERS, RUNS = (3, 20) if FULL else (2, 4)


def per_conversation(script: Callable[[int, dict[str, Any]], Message]) -> Callable[..., Message]:
    """``script`` indexed by the turn of each conversation (its tool results past the resumed
    history's), so one provider serves many runs at once."""
    base: list[int] = []
    lock = threading.Lock()

    def turn(_: int, body: dict[str, Any]) -> Message:
        tools = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        with lock:
            if not base:
                base.append(tools)
        return script(tools - base[0], body)

    return turn


def test_a_fleet_drains_the_runs_each_request_once(
    admitted: Continuation, workers: Workers
) -> None:
    stack = admitted.stack
    revision = source_revision(admitted.source)
    runs = [RUN] + [f"fleet-{n:02d}" for n in range(2, RUNS + 1)]
    for run_id in runs[1:]:
        seed_held_run(stack.ledger_stub(), FIXTURE, run_id, source_revision=revision)
        candidate = stack.candidate_of(run_id)
        assert candidate.eligible, candidate.holds
        stack.admissions().RequestInvalidReadContinuity(submission(candidate))

    ended: list[Finished] = []
    lock = threading.Lock()

    def supervisor() -> None:
        # restarts its worker after each request it ends, until the queue is empty
        for _ in range(RUNS + 1):
            finished = workers.start(model, args=["--all-runs"]).finish()
            with lock:
                ended.append(finished)
            if finished.returncode == EXIT_NOTHING_TO_RUN:
                return

    with ScriptedProvider(per_conversation(reference_script(COMMANDS))) as model:
        slots = [threading.Thread(target=supervisor) for _ in range(WORKERS)]
        for slot in slots:
            slot.start()
        for slot in slots:
            slot.join()

    completed = [f for f in ended if f.returncode == EXIT_COMPLETED]
    idle = [f for f in ended if f.returncode == EXIT_NOTHING_TO_RUN]
    assert len(completed) == RUNS, [f.message for f in ended if f not in completed + idle]
    assert len(idle) == WORKERS
    execution = admitted.execution()
    for run_id in runs:
        [request] = execution.ListExecutionRequests(
            execution_pb2.ListExecutionRequestsRequest(run_id=run_id)
        ).execution_requests
        assert request.state == common_pb2.EXECUTION_REQUEST_STATE_COMPLETED, run_id
        kinds = [kind_name(e) for e in journal_of(admitted, run_id)]
        assert kinds.count("worker_claimed") == 1, run_id  # none twice
        usage = execution.GetCommandUsage(execution_pb2.GetCommandUsageRequest(run_id=run_id))
        assert (usage.usage.used, usage.usage.limit) == (13, 22), run_id
    # every worker's completion names a distinct request
    names = {f.message.split()[1].rstrip(":") for f in completed}
    assert len(names) == RUNS
    # Contention, measured: the claims workers lost to another that claimed first. Harmless by
    # construction (each lost race moved on to the next request); printed for the record.
    lost = sum(
        int(line.rsplit(": ", 1)[1])
        for f in ended
        for line in f.stdout.splitlines()
        if line.startswith("claims lost to other workers first: ")
    )
    print(f"fleet of {WORKERS} over {RUNS} runs: {lost} claims lost to another worker")


def journal_of(admitted: Continuation, run_id: str) -> list[common_pb2.JournalEntry]:
    return whole_journal(admitted.stack.ledger_stub("reader-token"), run_id)
