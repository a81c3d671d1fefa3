"""The policy lock under the bench's loads (ADR 0049): how long writers wait for it and how long
they hold it, by mode, while (1) eight callers admit on runs of their own, (2) eight workers take
the worker path spread over two ledger replicas, and (3) both at once. Read from each ledger's
``forge_ledger_policy_lock_wait_seconds`` and ``forge_ledger_policy_lock_hold_seconds``
histograms over each timed window, and the admissions' hold of the pending cap's counter row
(``forge_ledger_pending_slot_hold_seconds``, absent before ADR 0049). Admissions all reach the
first replica (the admission service calls it); the workers call both."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench import figures, worker_path
from bench.load import Throughput

WAIT = "forge_ledger_policy_lock_wait_seconds"
HOLD = "forge_ledger_policy_lock_hold_seconds"
SLOT = "forge_ledger_pending_slot_hold_seconds"
LEDGERS = ("ledger", "ledger-2")
MEASURES = {"wait": WAIT, "hold": HOLD, "slot": SLOT}
# One histogram's (sum, count, {upper bound: cumulative count}) by its labels ("" for none).
Histograms = dict[str, tuple[float, int, dict[float, int]]]


def scrape(metrics: str, name: str) -> Histograms:
    """The histogram ``name`` of the ledger serving /metrics at ``metrics``, by label set."""
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found: dict[str, list[Any]] = {}
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        series, _, value = line.rpartition(" ")
        metric, _, labels = series.partition("{")
        labels = labels.rstrip("}")
        bound = ""
        if 'le="' in labels:
            parts = [part for part in labels.split(",") if not part.startswith("le=")]
            bound = next(p for p in labels.split(",") if p.startswith("le="))[4:-1]
            labels = ",".join(parts)
        entry = found.setdefault(labels, [0.0, 0, {}])
        if metric == f"{name}_sum":
            entry[0] = float(value)
        elif metric == f"{name}_count":
            entry[1] = int(float(value))
        elif metric == f"{name}_bucket":
            entry[2][float(bound)] = int(float(value))
    return {labels: (e[0], e[1], e[2]) for labels, e in found.items()}


def _difference(after: Histograms, before: Histograms) -> dict[str, dict[str, float]]:
    """Per label set: locks, mean and approximate p99 (the bucket bound it falls under), in ms."""
    out: dict[str, dict[str, float]] = {}
    for labels, (total, count, buckets) in after.items():
        was_total, was_count, was_buckets = before.get(labels, (0.0, 0, {}))
        locks = count - was_count
        if locks <= 0:
            continue
        within = {bound: n - was_buckets.get(bound, 0) for bound, n in buckets.items()}
        p99 = next((b for b in sorted(within) if within[b] >= 0.99 * locks), float("inf"))
        out[labels or "all"] = {
            "locks": locks,
            "mean_ms": round(1000 * (total - was_total) / locks, 3),
            "p99_bound_ms": round(1000 * p99, 1),
        }
    return out


def _measured(
    metrics: Mapping[str, str], loads: Mapping[str, Callable[[], Throughput]]
) -> dict[str, Any]:
    """Run ``loads`` at once; each ledger's wait and hold over the window, and each load's
    throughput."""

    def read(ledger: str) -> dict[str, Histograms]:
        return {key: scrape(metrics[ledger], name) for key, name in MEASURES.items()}

    before = {ledger: read(ledger) for ledger in LEDGERS}
    results: dict[str, Throughput] = {}
    errors: list[BaseException] = []

    def run(name: str, load: Callable[[], Throughput]) -> None:
        try:
            results[name] = load()
        except BaseException as error:  # noqa: BLE001 - re-raised below
            errors.append(error)

    threads = [threading.Thread(target=run, args=item) for item in loads.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    figure: dict[str, Any] = {
        name: {
            "per_second": round(t.per_second, 1),
            "p99_ms": t.latencies.as_dict()["p99_ms"],
            # CPU per call of the watched processes (ledgers, PostgreSQL, ...) over the window,
            # which the other load, when one runs at once, also spends
            "cpu_ms_per_call": t.cpu.per_call_ms(t.calls) if t.cpu else {},
        }
        for name, t in results.items()
    }
    for ledger in LEDGERS:
        after = read(ledger)
        figure[ledger] = {key: _difference(after[key], before[ledger][key]) for key in MEASURES}
    return figure


def policy_lock_figure(
    clients: figures.Clients, metrics: Mapping[str, str], admissions_each: int, requests_each: int
) -> dict[str, Any]:
    """The three loads, one after the other, on the same services."""

    def admissions(prefix: str) -> Callable[[], Throughput]:
        return lambda: figures.admission_throughput(clients, admissions_each, prefix=prefix)

    def workers(prefix: str, ledgers: Sequence[str]) -> Callable[[], Throughput]:
        prepared = worker_path.prepared_workers(clients, requests_each, prefix, ledgers)
        return lambda: worker_path.stepped(clients, prepared)

    return {
        "admissions": _measured(metrics, {"admissions": admissions("lock-admit-a")}),
        "worker_path": _measured(metrics, {"worker_path": workers("lock-work-w", LEDGERS)}),
        "both": _measured(
            metrics,
            {
                "admissions": admissions("lock-admit-b"),
                "worker_path": workers("lock-work-b", LEDGERS),
            },
        ),
    }
