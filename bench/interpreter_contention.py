"""``python -m bench.interpreter_contention``: why scenario 10's legitimate p99 ratio is larger on
SQLite (ADR 0048).

One ledger served in this process on each backend (a SQLite file; a PostgreSQL schema, which
needs the test server), eight threads calling ``GetRun`` 150 times each: the p50 and p99, and the
process's CPU per call (clients and server), first with the interpreter otherwise idle, then with
one more thread keeping it busy, as the refusals of strangers do in the scenario. Each shape is
measured twice, alternated. Printed as JSON per backend.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from typing import Any

from forge.continuity.v1 import ledger_pb2
from services.demo.seed import load_fixture, seed_held_run
from services.ledger.database import make_engine, migrate
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from tests.conftest import postgres_schema
from tests.ledger.conftest import LedgerClients
from tests.support import serve, token_roles

CALLERS = 8
CALLS = 150


def _spin(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(2000))


def _round(clients: LedgerClients, busy: bool) -> dict[str, Any]:
    stop = threading.Event()
    spinner = threading.Thread(target=_spin, args=(stop,))
    if busy:
        spinner.start()
    latencies: list[float] = []
    lock = threading.Lock()

    def caller() -> None:
        stub = clients.ledger("reader-token")
        for _ in range(CALLS):
            started = time.perf_counter()
            stub.GetRun(ledger_pb2.GetRunRequest(run_id="run-1"), timeout=30)
            with lock:
                latencies.append(time.perf_counter() - started)

    cpu = time.process_time()
    threads = [threading.Thread(target=caller) for _ in range(CALLERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpu = time.process_time() - cpu
    stop.set()
    if busy:
        spinner.join()
    cuts = statistics.quantiles(latencies, n=100)
    figure: dict[str, Any] = {
        "p50_ms": round(cuts[49] * 1000, 1),
        "p99_ms": round(cuts[98] * 1000, 1),
    }
    if not busy:  # the spinner's own CPU would count in a busy round
        figure["cpu_us_per_call"] = round(cpu / len(latencies) * 1e6)
    return figure


def _backend(url: str) -> dict[str, Any]:
    engine = make_engine(url)
    try:
        with serve("ledger", bindings(Ledger(engine, authority=token_roles))) as served:
            clients = LedgerClients(served)
            seed_held_run(clients.ledger(), load_fixture("v1_basic"), "run-1")
            _round(clients, busy=False)  # warm-up
            return {
                "rounds": [
                    {"idle": _round(clients, busy=False), "busy": _round(clients, busy=True)}
                    for _ in range(2)
                ],
            }
    finally:
        engine.dispose()


def main() -> int:
    figure: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/ledger.db"
        migrate(url)
        figure["sqlite"] = _backend(url)
    with postgres_schema() as url:
        figure["postgresql"] = _backend(url)
    print(json.dumps(figure, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
