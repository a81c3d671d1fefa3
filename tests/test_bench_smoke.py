"""The whole bench (``python -m bench``, every figure of ``make bench``) runs at its smallest size
in the suite, as its own process against the real services and PostgreSQL.

A change elsewhere once broke the bench unseen (the benched ledger refused the unsigned head the
bulk seeding left), because nothing in the suite ran it whole. This test runs it and checks that
it exits cleanly and writes every figure and every targeted line, never how fast anything was:
at this size on a shared machine the ratios say nothing about speed."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from bench.paired import SUFFIXES
from bench.summary import TARGETS
from tests.conftest import require_postgres
from tests.support import DEDICATED_SUFFIX, POSTGRES_URL, ensure_test_database

ROOT = Path(__file__).resolve().parent.parent
# The smallest run the bench allows (docs/performance.md, "Reproducing"): one paired round, the
# RSS figure's long phase at its floor of 1,000 operations.
SMOKE = {
    "FORGE_BENCH_SCALE": "0.01",
    "FORGE_BENCH_ROUNDS": "1",
    "FORGE_BENCH_RSS_OPERATIONS": "1000",
}
# What the full run records (bench/__main__.py, ``measure``).
FIGURES = (
    "reconstruction",
    "admission",
    "append",
    "worker_path",
    "candidate",
    "followers",
    "replicas",
    "memory",
)
# The one targeted line not measured in paired rounds (bench.summary.summary): no spread.
UNPAIRED = {"rss_peak_ratio"}
VERDICTS = {"met", "missed", "straddles"}

pytestmark = pytest.mark.timeout(600)


def bench_database_url() -> str:
    """The suite's server, in a database of the bench's own beside the suite's
    (``forge_continuity_bench_test`` by default): the bench creates and drops its schemas there,
    never among the suite's, and charges only that database's sessions to its CPU figures."""
    url = make_url(POSTGRES_URL)
    name = (url.database or "").removesuffix(DEDICATED_SUFFIX)
    return url.set(database=f"{name}_bench{DEDICATED_SUFFIX}").render_as_string(False)


def _files(directory: Path) -> dict[str, tuple[int, int]]:
    return {
        str(path.relative_to(directory)): (path.stat().st_mtime_ns, path.stat().st_size)
        for path in directory.rglob("*")
        if path.is_file()
    }


def _leaves(value: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    """Every leaf of a JSON document with its path."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _leaves(inner, f"{where}/{key}")
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _leaves(inner, f"{where}[{index}]")
    else:
        yield where, value


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


@pytest.fixture(scope="module")
def smoke_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    require_postgres()
    database = bench_database_url()
    ensure_test_database(database)
    results = tmp_path_factory.mktemp("bench-results")
    checkout_results = _files(ROOT / "bench" / "results")
    env = {
        **os.environ,
        **SMOKE,
        "FORGE_BENCH_POSTGRES_URL": database,
        "FORGE_BENCH_RESULTS": str(results),
        "PYTHONPATH": os.pathsep.join(str(ROOT / part) for part in (".", "shared/gen")),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    finished = subprocess.run(
        [sys.executable, "-m", "bench"],
        cwd=results,  # anything written relative to the working directory lands here
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert _files(ROOT / "bench" / "results") == checkout_results, (
        "the bench wrote into the checkout"
    )
    return finished, results


def test_the_whole_bench_exits_cleanly_and_writes_only_where_told(
    smoke_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    finished, results = smoke_run
    assert finished.returncode == 0, finished.stderr[-4000:]
    assert sorted(path.name for path in results.iterdir()) == [
        "candidate_latency.png",
        "latest.json",
    ]


def _results(smoke_run: tuple[subprocess.CompletedProcess[str], Path]) -> dict[str, Any]:
    """The run's latest.json, once it is known to have finished well."""
    finished, results = smoke_run
    assert finished.returncode == 0, finished.stderr[-4000:]
    document: dict[str, Any] = json.loads((results / "latest.json").read_text(encoding="utf-8"))
    return document


def test_every_figure_is_recorded_in_finite_numbers(
    smoke_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    document = _results(smoke_run)
    assert set(FIGURES) <= set(document["figures"])
    assert document["targets"] == TARGETS
    not_finite = [(where, v) for where, v in _leaves(document["figures"]) if not _finite(v)]
    assert not_finite == []
    # the main phase's later figures each start on a vacuumed schema
    assert set(document["figures"]["vacuumed_before"]) == {"append", "worker_path", "candidate"}


def test_every_targeted_line_has_its_spread_rounds_and_verdict(
    smoke_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    document = _results(smoke_run)
    lines = document["summary"]
    # Figure 2's target names its longest journal (100,000 entries); a smoke run's is shorter.
    longest = max(row["entries"] for row in document["figures"]["candidate"] if "candidate" in row)
    candidate = f"candidate_{longest}_ratio"
    for key in TARGETS:
        name = candidate if key.startswith("candidate_") else key
        assert _finite(lines.get(name)), name
        if key in UNPAIRED:
            continue
        low, high = lines[f"{name}_spread"]
        assert _finite(low) and _finite(high) and low <= lines[name] <= high, name
        least, most = lines[f"{name}_range"]
        assert least <= low and high <= most, name
        assert lines[f"{name}_rounds"] >= 1, name
        if name in TARGETS:
            assert lines[f"{name}_verdict"] in VERDICTS, name
    # Every other line too: a number, or a paired ratio's spread, rounds and verdict.
    for name, value in lines.items():
        if name.endswith("_verdict"):
            assert value in VERDICTS, name
        elif name.endswith(("_spread", "_range")):
            assert all(_finite(end) for end in value), name
        else:
            assert _finite(value), name
    # and printed, one line per figure (the services' own log lines may be printed between)
    printed = {line.split()[0] for line in smoke_run[0].stdout.splitlines() if line.strip()}
    assert {name for name in lines if not name.endswith(SUFFIXES)} <= printed
