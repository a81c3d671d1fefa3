"""The worker-path figure (round 4): what grows with a fleet of workers is not admission but the
ledger calls every worker makes after it. Eight concurrent workers, each on requests admitted
before the timed window, take the reference worker's own steps through its own ledger port
(``services.worker``): claim, two charged commands each between its intent and its outcome, and
completion — eight steps per request, four of them native journal appends.

One step is what the worker does as one unit, with the reads the worker itself makes in it: the
claim finds its ``worker_claimed`` entry and a charged command learns its receipt's hash (the
head the next write chains to) — from the answers, or by reading them back from a ledger that
does not answer with them. The figure is steps per second beside the one-hop baseline's
calls per second, and reports the ledger RPCs a step costs so the two can be compared honestly.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.figures import (
    CALLERS,
    FIXTURE,
    Clients,
    prepared_admissions,
    submission,
)
from bench.floors import throughput_figure
from bench.load import Latencies, Throughput, run_concurrently
from bench.paired import in_turn
from bench.seed import seed_long_held_run
from forge.continuity.v1 import candidate_pb2, common_pb2, execution_pb2
from services.worker.journaling import Journal
from services.worker.ledger_port import LedgerPort, Presented
from services.worker.owner import owner_instance
from services.worker.run import claim_entry

# The reference worker's development credential (services.runner.DEV_PRINCIPALS).
WORKER_TOKEN = "dev-worker-token"  # noqa: S105 - local-only development credential
STEPS = ("claim", "intent", "record", "outcome", "intent", "record", "outcome", "complete")
# Ledger RPCs each request costs: the run read and the claim, then one call per other step
# (the claim and the receipt answer with the entries the worker chains to).
RPCS_PER_REQUEST = 2 + 1 + 1 + 1 + 1 + 1 + 1 + 1
NATIVE_APPENDS_PER_REQUEST = 4


@dataclass
class _Worker:
    """One worker's requests and its journal under the current claim."""

    port: LedgerPort
    requests: list[common_pb2.ExecutionRequest]
    journal: Journal | None = None
    commands: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def step(self, n: int) -> None:
        request, step = self.requests[n // len(STEPS)], STEPS[n % len(STEPS)]
        if step == "claim":
            run = self.port.get_run(request.run_id).run
            presented = Presented("", "", run.source_profile)
            answer = self.port.claim(
                request.execution_request_id, run, presented, owner_instance()
            ).answer
            head = claim_entry(self.port, answer).hash
            self.journal = Journal(
                self.port, answer.execution_request, head, source_revision=run.source_revision
            )
            return
        journal = self.journal
        assert journal is not None
        call_id = f"call-{self.commands}"
        command_id = f"{journal.claimed.execution_request_id}.{call_id}"
        if step == "intent":
            journal.write(
                "tool_intent",
                {
                    "call_id": call_id,
                    "tool_name": "run_command",
                    "command_id": command_id,
                    "command_digest": "sha256:" + "1" * 64,
                },
            )
        elif step == "record":
            receipt = journal.record_command(command_id, "sha256:" + "1" * 64)
            if not receipt.charged:
                raise RuntimeError(f"command {command_id} was not charged")
        elif step == "outcome":
            journal.write("tool_outcome", {"call_id": call_id, "status": "succeeded"})
            self.commands += 1
        else:
            self.port.complete(
                journal.claimed,
                execution_pb2.GOAL_CLAIM_UNKNOWN,
                "sha256:" + "2" * 64,
            )
            self.journal = None


def admitted_requests(
    clients: Clients, prefix: str, count: int
) -> list[common_pb2.ExecutionRequest]:
    """``count`` held runs seeded and admitted through the services: queued requests."""
    admissions = clients.admissions()
    queued = []
    for prepared in prepared_admissions(clients, prefix, count):
        ticket = admissions.RequestInvalidReadContinuity(prepared).ticket
        queued.append(ticket.execution_request)
    return queued


def prepared_workers(
    clients: Clients, requests_each: int, prefix: str, ledgers: Sequence[str] = ("ledger",)
) -> list[_Worker]:
    """8 workers with ``requests_each`` admitted requests each, after one warm-up request each
    (connections and first-call paths, not timed); worker i calls ledger ``ledgers[i % n]``."""
    queued = admitted_requests(clients, prefix, CALLERS * (requests_each + 1))
    workers = [
        _Worker(
            LedgerPort(clients.target(ledgers[i % len(ledgers)]), WORKER_TOKEN),
            queued[i * (requests_each + 1) : (i + 1) * (requests_each + 1)],
        )
        for i in range(CALLERS)
    ]
    for worker in workers:
        for n in range(len(STEPS)):
            worker.step(n)
        worker.requests = worker.requests[1:]
    return workers


def stepped(clients: Clients, workers: list[_Worker]) -> Throughput:
    """Every worker takes every step of its requests, concurrently; the ports are closed after."""
    try:
        steps = len(workers[0].requests) * len(STEPS)
        return run_concurrently([worker.step for worker in workers], steps, watch=clients.pids)
    finally:
        for worker in workers:
            worker.port.close()


def worker_path_throughput(
    clients: Clients,
    requests_each: int,
    prefix: str = "bench-worker",
    ledgers: Sequence[str] = ("ledger",),
) -> Throughput:
    """8 workers, each taking the eight steps on ``requests_each`` admitted requests of its own,
    spread over ``ledgers`` (replicas on one schema)."""
    return stepped(clients, prepared_workers(clients, requests_each, prefix, ledgers))


_LOCK_WAIT = "forge_ledger_policy_lock_wait_seconds"


def policy_lock_wait(metrics: str) -> tuple[float, int]:
    """(seconds waited in all, locks taken) of one ledger's policy-lock histogram."""
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found = {
        name: float(value)
        for name, _, value in (line.partition(" ") for line in text.splitlines())
        if name in (f"{_LOCK_WAIT}_sum", f"{_LOCK_WAIT}_count")
    }
    return found.get(f"{_LOCK_WAIT}_sum", 0.0), int(found.get(f"{_LOCK_WAIT}_count", 0))


def replicas_round(
    clients: Clients, metrics: Mapping[str, str], requests_each: int, prefix: str, index: int = 0
) -> dict[str, Any]:
    """The worker path through the first ledger alone and spread over both replicas (the second
    idle in the first), both halves' requests admitted before either is timed and the halves
    timed back to back in alternating order (bench.paired.in_turn), with each ledger's
    policy-lock waits over each timed half (the histogram times the lock statements, so it
    includes the process's own scheduling): the ratio is two replicas' steps per second over
    one's."""
    spreads = {"one": ("ledger",), "two": ("ledger", "ledger-2")}
    workers = {
        name: prepared_workers(clients, requests_each, f"{prefix}-{name}", ledgers)
        for name, ledgers in spreads.items()
    }

    def half(name: str) -> Callable[[], dict[str, Any]]:
        def timed_half() -> dict[str, Any]:
            ledgers = spreads[name]
            before = {ledger: policy_lock_wait(metrics[ledger]) for ledger in ledgers}
            measured = stepped(clients, workers[name])
            waits = {}
            for ledger in ledgers:
                seconds, count = policy_lock_wait(metrics[ledger])
                waits[ledger] = {
                    "locks": count - before[ledger][1],
                    "wait_ms": round(1000 * (seconds - before[ledger][0]), 1),
                }
            wait_ms = sum(w["wait_ms"] for w in waits.values())
            return {
                "throughput": measured,
                "policy_lock_wait": waits,
                "policy_lock_wait_ms_per_step": round(wait_ms / measured.calls, 3),
            }

        return timed_half

    halves = dict(zip(spreads, in_turn(index, [half(name) for name in spreads]), strict=True))
    one, two = halves["one"]["throughput"], halves["two"]["throughput"]
    return {
        **throughput_figure(two, one),
        "policy_lock_wait_ms_per_step_one": halves["one"]["policy_lock_wait_ms_per_step"],
        "policy_lock_wait_ms_per_step_two": halves["two"]["policy_lock_wait_ms_per_step"],
        "policy_lock_wait": {name: half["policy_lock_wait"] for name, half in halves.items()},
    }


def describe(measured: Throughput) -> dict[str, Any]:
    """What one step stands for, beside the figure."""
    requests = measured.calls / len(STEPS)
    return {
        "steps_per_request": len(STEPS),
        "ledger_rpcs_per_request": RPCS_PER_REQUEST,
        "native_appends_per_request": NATIVE_APPENDS_PER_REQUEST,
        "requests_per_second": round(requests / measured.seconds, 2) if measured.seconds else 0,
    }


def steps_on_long_runs(
    clients: Clients, database_url: str, lengths: tuple[int, ...], runs_each: int
) -> list[dict[str, Any]]:
    """One worker's step latencies on requests of runs whose journals have each length: the
    worker path must not cost more the longer the run it continues."""
    ledger = clients.ledger()
    candidates = clients.candidates(timeout=300.0)
    admissions = clients.admissions()
    rows = []
    for length in lengths:
        queued = []
        for n in range(runs_each):
            run_id = f"bench-worker-long-{length}-{n}"
            seed_long_held_run(ledger, database_url, FIXTURE, run_id, length, eligible=True)
            candidate = candidates.GetInvalidReadContinuityCandidate(
                candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_id)
            ).candidate
            ticket = admissions.RequestInvalidReadContinuity(submission(candidate, f"req-{n}"))
            queued.append(ticket.ticket.execution_request)
        worker = _Worker(LedgerPort(clients.target("ledger"), WORKER_TOKEN), queued)
        samples: dict[str, list[float]] = {}
        try:
            for n in range(len(queued) * len(STEPS)):
                began = time.perf_counter()
                worker.step(n)
                samples.setdefault(STEPS[n % len(STEPS)], []).append(time.perf_counter() - began)
        finally:
            worker.port.close()
        every = [s for values in samples.values() for s in values]
        rows.append(
            {
                "entries": length,
                "step": Latencies.of(every).as_dict(),
                "by_step": {name: Latencies.of(v).as_dict() for name, v in samples.items()},
            }
        )
    return rows
