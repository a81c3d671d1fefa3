"""`make bench-repeat`: consecutive full ``make bench`` runs on one machine (three unless
FORGE_BENCH_REPEAT_RUNS says otherwise), each in a process of its own writing to a directory of
its own, then bench/results/three-runs.json: every run's summary, the median of each key over the
runs, and for each paired ratio whether the runs agree. The last run's latest.json and plot
become bench/results/latest.json and candidate_latency.png.

Runs agree on a ratio when every run's median lies inside every other run's spread: what issue
50 asks of a figure that reproduces. ``rss_peak_ratio`` has no rounds, so its spread is that of
the runs themselves.

Each run starts from the same database state: its schemas are fresh, and before it the bench's
database is vacuumed (the catalog rows earlier runs' schemas left dead: a server may run without
autovacuum, as the CI machine's does) and checkpointed (so no run inherits another's dirty
buffers and WAL). What that found is recorded beside each run (``database_before``).

The machine itself is sampled before every run and after the last (``machine``,
bench.machine): how much slower it runs interpreted Python than C right now. A ratio that
drifts run by run while the database starts alike (issue 50) is the machine's if that moves
with it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bench.cpu import POSTGRES_URL
from bench.load import median
from bench.machine import sample
from bench.paired import SUFFIXES
from bench.stack import autocommit_connection

RESULTS = Path(__file__).resolve().parent / "results"
RUNS = int(os.environ.get("FORGE_BENCH_REPEAT_RUNS", "3"))


def agreement(summaries: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per paired ratio (a key with a ``_spread`` in every run): each run's median and spread
    (and range, where the runs give one), and whether every run's median lies inside every
    other run's spread."""
    paired = [
        key
        for key in summaries[0]
        if f"{key}_spread" in summaries[0] and all(f"{key}_spread" in s for s in summaries)
    ]
    found = {}
    for key in paired:
        medians = [float(s[key]) for s in summaries]
        spreads = [(float(s[f"{key}_spread"][0]), float(s[f"{key}_spread"][1])) for s in summaries]
        agree = all(
            low <= value <= high
            for i, value in enumerate(medians)
            for j, (low, high) in enumerate(spreads)
            if i != j
        )
        found[key] = {"medians": medians, "spreads": [list(s) for s in spreads], "agree": agree}
        if all(f"{key}_range" in s for s in summaries):
            found[key]["ranges"] = [list(s[f"{key}_range"]) for s in summaries]
    return found


def medians(summaries: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The median over the runs of every numeric key (not the spreads, rounds or verdicts)."""
    return {
        key: round(median([float(s[key]) for s in summaries]), 3)
        for key, value in summaries[0].items()
        if isinstance(value, int | float)
        and not isinstance(value, bool)
        and not key.endswith(SUFFIXES)
        and all(key in s for s in summaries)
    }


def settle_database(url: str = POSTGRES_URL) -> dict[str, Any]:
    """Vacuum and checkpoint the bench's database before a run; what was there before (dead
    catalog rows, the server's checkpoints so far, the WAL written) and how long it took."""
    with autocommit_connection(url) as connection:
        found = dict(
            connection.execute(
                text(
                    "SELECT (SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_sys_tables)"
                    " AS dead_catalog_rows,"
                    " (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)"
                    " AS checkpoints,"
                    " pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') AS wal_bytes,"
                    " current_setting('autovacuum') AS autovacuum"
                )
            )
            .mappings()
            .one()
        )
        started = time.perf_counter()
        connection.execute(text("VACUUM"))
        connection.execute(text("CHECKPOINT"))
        found["settle_seconds"] = round(time.perf_counter() - started, 3)
    return {key: value if isinstance(value, str) else float(value) for key, value in found.items()}


def repeat(
    command: Sequence[str],
    runs: int,
    results: Path,
    settle: Callable[[], dict[str, Any]] = settle_database,
    machine: Callable[[], dict[str, float]] = sample,
) -> dict[str, Any]:
    """Run ``command`` (a full bench) ``runs`` times, each writing to a directory of its own
    (FORGE_BENCH_RESULTS) after ``settle`` readied the database; ``machine`` times the machine
    before each run and after the last. Keep the last run's latest.json and plot in ``results``
    and write three-runs.json there. Returns what it wrote."""
    summaries = []
    before = []
    timed = []
    with tempfile.TemporaryDirectory(prefix="forge-bench-repeat-") as scratch:
        for run in range(runs):
            directory = Path(scratch) / f"run-{run + 1}"
            print(f"== make bench, run {run + 1} of {runs}", flush=True)
            env = {**os.environ, "FORGE_BENCH_RESULTS": str(directory)}
            before.append(settle())
            timed.append(machine())
            subprocess.run(list(command), env=env, check=True)
            summaries.append(json.loads((directory / "latest.json").read_text())["summary"])
        timed.append(machine())
        last = Path(scratch) / f"run-{runs}"
        results.mkdir(parents=True, exist_ok=True)
        for name in ("latest.json", "candidate_latency.png"):
            shutil.copyfile(last / name, results / name)
    rss = [float(s["rss_peak_ratio"]) for s in summaries]
    document = {
        "runs": summaries,
        "median": medians(summaries),
        "agreement": agreement(summaries),
        "rss_peak_ratio_spread_over_runs": [min(rss), max(rss)],
        "database_before": before,
        "machine": timed,
    }
    written = results / "three-runs.json"
    written.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return document


def main() -> int:
    document = repeat([sys.executable, "-m", "bench"], RUNS, RESULTS)
    for key, row in document["agreement"].items():
        print(f"{key} {row['medians']} {'agree' if row['agree'] else 'DISAGREE'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
