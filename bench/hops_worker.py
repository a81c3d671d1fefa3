"""The worker path and one journal append, counted like an admission (bench/hops.py, issue 50 §2):
per step, per service and call site, the gRPC bytes and calls, protobuf messages serialized and
parsed, JSON written and parsed, SHA-256 digests, signatures, SQL statements and transactions,
and the time inside the counted calls.

The worker path is what ``bench/worker_path.py`` times: the reference worker's own steps on an
admitted request (claim, then two charged commands each between its intent and its outcome, then
completion), through ``services.worker``'s ledger port. The append is what figure 3 times: one
``AppendJournalEntry`` with the expected head on a plain run. Requests are seeded and admitted
before counting starts, and one request (one append) is taken first, uncounted, to warm every
path; the counts are then the per-step (per-append) mean.

Statements are what the statement floors bound: the worker path figure is judged against
``bench.floors.WORKER_STEP_STATEMENTS`` single-row inserts a step, the append figure against the
one-statement baseline transaction, so the tables set each step's statements beside them."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import grpc
from sqlalchemy import Engine

from bench import floors
from bench.figures import bench_run_request
from bench.hops import (
    KINDS,
    RESULTS,
    SERVICES,
    Tally,
    _channel,
    _CountingInterceptor,
    _per_admission,
    admission_stub,
    counting,
    counting_database,
    prepared_submissions,
)
from bench.worker_path import STEPS, _Worker
from forge.continuity.v1 import common_pb2, execution_pb2_grpc, ledger_pb2, ledger_pb2_grpc
from services.worker.ledger_port import LedgerPort

#: Requests the worker path is counted on (each eight steps), appends counted.
WORKER_REQUESTS = 10
APPENDS = 40
#: The test principals' worker and writer tokens (tests.support).
WORKER_TOKEN = "worker-token"  # noqa: S105 - test credential
WRITER_TOKEN = "writer-token"  # noqa: S105 - test credential


class _CountedPort(LedgerPort):
    """The worker's ledger port, its channel counted like every channel between services."""

    def __init__(self, tally: Tally, target: str) -> None:
        super().__init__(target, WORKER_TOKEN)
        self._channel = grpc.intercept_channel(self._channel, _CountingInterceptor(tally, "worker"))
        self._ledger = ledger_pb2_grpc.LedgerServiceStub(self._channel)
        self._execution = execution_pb2_grpc.ExecutionServiceStub(self._channel)


def _flat(tally: Tally) -> Counter[tuple[str, ...]]:
    """Every counter of ``tally`` in one, to subtract one moment from another."""
    flat: Counter[tuple[str, ...]] = Counter()
    with tally.lock:
        for scope, kinds in tally.work.items():
            flat.update({("work", scope, kind): n for kind, n in kinds.items()})
        for scope, verbs in tally.statements.items():
            flat.update({("sql", scope, verb): n for verb, n in verbs.items()})
        for name, counts in tally.hops.items():
            flat.update({("hop", name, key): n for key, n in counts.items()})
        for scope, kinds in tally.seconds.items():
            flat.update({("seconds", scope, kind): n for kind, n in kinds.items()})
        flat.update({("site", site): n for site, n in tally.sites.items()})
    return flat


def _step_table(total: Counter[tuple[str, ...]], occurrences: int) -> dict[str, Any]:
    """One step's counts (``total`` over its ``occurrences``) as the admission's are shown."""

    def mean(value: float) -> float:
        return round(value / occurrences, 2)

    scopes = [s for s in ("worker", *SERVICES) if any(k[:2] == ("work", s) for k in total)]
    return {
        "work": {s: {kind: mean(total[("work", s, kind)]) for kind in KINDS} for s in scopes},
        "statements": {
            key[1]: {v[2]: mean(n) for v, n in sorted(total.items()) if v[:2] == ("sql", key[1])}
            for key in total
            if key[0] == "sql"
        },
        "hops": {
            key[1]: {
                field: mean(total[("hop", key[1], field)])
                for field in ("calls", "request bytes", "response bytes")
            }
            for key in sorted(total)
            if key[0] == "hop" and key[2] == "calls"
        },
        "microseconds": {
            s: {
                kind: round(1e6 * total[("seconds", s, kind)] / occurrences, 1)
                for kind in KINDS
                if total[("seconds", s, kind)]
            }
            for s in scopes
        },
        "sites": {key[1]: mean(n) for key, n in total.most_common() if key[0] == "site"},
    }


def count_worker_path(
    engine: Engine, requests: int = WORKER_REQUESTS, *, signed: bool = True
) -> dict[str, Any]:
    """Admit ``requests`` + 1 held runs (uncounted), take one request's steps to warm up, then
    count each step of the others, by step. The ledger signs each head, as the timed figure's
    does (``signed`` False: without, one signature and one statement fewer a write)."""
    with counting(engine, client="worker", signed=signed) as (tally, targets):
        admit = admission_stub(tally, targets)
        queued = [
            admit.RequestInvalidReadContinuity(prepared).ticket.execution_request
            for prepared in prepared_submissions(tally, targets, requests + 1)
        ]
        port = _CountedPort(tally, targets["ledger"])
        worker = _Worker(port, queued)
        by_step: dict[str, Counter[tuple[str, ...]]] = {name: Counter() for name in STEPS}
        try:
            for n in range(len(STEPS)):
                worker.step(n)
            tally.active = True
            for n in range(len(STEPS), len(queued) * len(STEPS)):
                before = _flat(tally)
                worker.step(n)
                by_step[STEPS[n % len(STEPS)]].update(_flat(tally) - before)
            tally.active = False
        finally:
            port.close()
    occurrences = Counter(STEPS)
    steps = {name: _step_table(by_step[name], occurrences[name] * requests) for name in by_step}
    every: Counter[tuple[str, ...]] = Counter()
    for total in by_step.values():
        every.update(total)
    path = _step_table(every, len(STEPS) * requests)
    statements = path["work"]["ledger"]["statements"]
    return {
        "requests": requests,
        "signed": signed,
        "steps_per_request": len(STEPS),
        "steps": steps,
        "per_step": path,
        "statements_per_step": statements,
        "statement_floor": floors.WORKER_STEP_STATEMENTS,
        "statements_over_floor": round(statements / floors.WORKER_STEP_STATEMENTS, 3),
    }


def count_appends(engine: Engine, appends: int = APPENDS, *, signed: bool = True) -> dict[str, Any]:
    """One plain run, one warm-up append, then ``appends`` appends with the expected head, as
    figure 3's writers make them (signed as for the worker path)."""
    with counting(engine, client="writer", signed=signed) as (tally, targets):
        stub = ledger_pb2_grpc.LedgerServiceStub(
            _channel(tally, "writer", targets["ledger"], WRITER_TOKEN)
        )
        run_id = f"hops-append-{id(tally):x}"
        stub.CreateRun(bench_run_request(run_id))
        head = ""

        def append(n: int) -> None:
            nonlocal head
            head = stub.AppendJournalEntry(
                ledger_pb2.AppendJournalEntryRequest(
                    run_id=run_id,
                    expected_head_hash=head,
                    kind=common_pb2.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
                    payload_json=json.dumps({"annotation": f"n{n}"}),
                )
            ).entry.hash

        append(0)
        tally.active = True
        for n in range(1, appends + 1):
            append(n)
        tally.active = False
    result = _per_admission(tally, appends)
    del result["admissions"]
    result["appends"] = appends
    result["signed"] = signed
    result["baseline_statements"] = 1
    return result


def _rows(title: str, work: dict[str, dict[str, float]]) -> list[str]:
    return [
        f"| {title} {scope} | " + " | ".join(f"{kinds[k]:g}" for k in KINDS) + " |"
        for scope, kinds in work.items()
    ]


def table(worker: dict[str, Any], appends: dict[str, Any]) -> str:
    """The markdown tables docs/performance.md shows for the worker path and the append."""
    header = ["| step, service | " + " | ".join(KINDS) + " |", "|---" * (len(KINDS) + 1) + "|"]
    lines = [
        "| step: caller -> method | calls | request bytes | response bytes |",
        "|---|---|---|---|",
    ]
    for name in dict.fromkeys(STEPS):
        for hop, counts in worker["steps"][name]["hops"].items():
            lines.append(
                f"| {name}: {hop} | {counts['calls']:g} | {counts['request bytes']:,.0f} "
                f"| {counts['response bytes']:,.0f} |"
            )
    lines += ["", *header]
    for name in dict.fromkeys(STEPS):
        lines += _rows(name, worker["steps"][name]["work"])
    lines += _rows("mean step", worker["per_step"]["work"])
    lines += ["", *header, *_rows("append", appends["work"])]
    return "\n".join(lines)


def main(sqlite: bool = False) -> dict[str, Any]:
    results: dict[str, Any] = {}
    counts: dict[str, Callable[[Engine], dict[str, Any]]] = {
        "worker_path": count_worker_path,
        "append": count_appends,
    }
    for name, count in counts.items():
        with counting_database(sqlite) as engine:
            results[name] = count(engine)
    results["database"] = "sqlite" if sqlite else "postgresql"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "hops-worker.json").write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(table(results["worker_path"], results["append"]))
    return results


if __name__ == "__main__":
    main(sqlite="--sqlite" in sys.argv)
