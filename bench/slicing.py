"""`python -m bench.slicing [rounds]`: does slicing a round into short windows taken in turn narrow
the spread of a paired ratio? (ADR 0061: the machine's slow phases last about as long as a
round's windows, so two windows timed back to back can catch different phases.)

On figure 3's shape (8 writers appending to runs of their own, beside the one-hop baseline),
each round measures the ratio twice: once as the bench does (one window of ``CALLS`` calls per
caller for each side, in alternating order) and once sliced (``SLICES`` windows of
``CALLS / SLICES`` calls per side, the sides taken in turn, each side's calls over its summed
time). It prints and writes to bench/results/slicing.json each scheme's median, range,
interquartile range and standard deviation over the rounds, with the machine's sample before
and after (bench.machine). An experiment for the next change to the bench, not a figure.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bench import figures
from bench.load import Throughput
from bench.machine import sample
from bench.paired import Spread, in_turn
from bench.stack import Baseline, baseline_server, bench_schema, services

RESULTS = Path(__file__).resolve().parent / "results"
CALLS = 300  # per caller and side, as a round of figure 3
SLICES = 6


def sliced_ratio(pairs: Sequence[tuple[Throughput, Throughput]]) -> float:
    """The subject's calls per second over the floor's, each summed over its slices
    (``pairs``: one (floor, subject) per slice)."""
    floor_calls = sum(floor.calls for floor, _ in pairs)
    floor_seconds = sum(floor.seconds for floor, _ in pairs)
    subject_calls = sum(subject.calls for _, subject in pairs)
    subject_seconds = sum(subject.seconds for _, subject in pairs)
    return (subject_calls / subject_seconds) / (floor_calls / floor_seconds)


def spread(values: Sequence[float]) -> dict[str, Any]:
    """The rounds' median and range (bench.paired.Spread), interquartile range, standard
    deviation and values."""
    ordered = sorted(values)
    rounds = Spread.of(ordered)
    return {
        "median": rounds.median,
        "range": [rounds.least, rounds.most],
        "iqr": round(ordered[3 * len(ordered) // 4] - ordered[len(ordered) // 4], 3),
        "stdev": round(statistics.stdev(ordered), 3) if len(ordered) > 1 else 0.0,
        "values": [round(value, 3) for value in values],
    }


def compare(
    floor: Callable[[int], Throughput],
    subject: Callable[[int, str], Throughput],
    rounds: int,
    calls: int = CALLS,
    slices: int = SLICES,
) -> dict[str, Any]:
    """Per round, the ratio in one window a side and in ``slices`` windows a side."""
    whole: list[float] = []
    sliced: list[float] = []
    for index in range(rounds):
        once = in_turn(index, [partial(floor, calls), partial(subject, calls, f"whole-{index}")])
        whole.append(once[1].per_second / once[0].per_second)
        pairs = []
        for part in range(slices):
            slice_floor, slice_subject = in_turn(
                index + part,
                [
                    partial(floor, calls // slices),
                    partial(subject, calls // slices, f"slice-{index}-{part}"),
                ],
            )
            pairs.append((slice_floor, slice_subject))
        sliced.append(sliced_ratio(pairs))
        print(f"round {index}: whole {whole[-1]:.3f}, sliced {sliced[-1]:.3f}", flush=True)
    return {"whole": spread(whole), "sliced": spread(sliced)}


def appends_beside_baseline(
    baseline: Baseline, clients: figures.Clients
) -> tuple[Callable[[int], Throughput], Callable[[int, str], Throughput]]:
    return (
        lambda calls: figures.baseline_floor(baseline, calls),
        lambda calls, prefix: figures.append_throughput(clients, calls, prefix=f"slicing-{prefix}"),
    )


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    document: dict[str, Any] = {"machine_before": sample(1.0)}
    with bench_schema() as url, baseline_server(url) as baseline, services(url) as running:
        clients = figures.Clients(running)
        floor, subject = appends_beside_baseline(baseline, clients)
        floor(20), subject(20, "warm-up")
        document.update(compare(floor, subject, rounds))
    document["machine_after"] = sample(1.0)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "slicing.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    for scheme in ("whole", "sliced"):
        found = document[scheme]
        print(
            f"{scheme}: median {found['median']} range {found['range']} iqr {found['iqr']}"
            f" stdev {found['stdev']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
