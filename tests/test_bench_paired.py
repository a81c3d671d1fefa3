"""The bench's paired rounds and spreads (bench/paired.py, bench/summary.py, bench/repeat.py):
the order a round times its windows in, the spread and verdict of a ratio over its rounds, and
the lines ``make bench`` prints and ``make bench-repeat`` compares. Pure: no services."""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import floors, summary
from bench.cpu import CpuUse
from bench.load import Latencies, Throughput
from bench.paired import (
    CONFIDENCE,
    Spread,
    Target,
    _coverage,
    in_turn,
    order_statistic,
    printed,
    spread_lines,
)
from bench.repeat import agreement, medians, repeat

ratios = st.lists(
    st.floats(min_value=0.001, max_value=100, allow_nan=False), min_size=1, max_size=12
)
targets = st.builds(
    Target,
    st.sampled_from([">=", "<=", ">", "<"]),
    st.floats(min_value=0.001, max_value=100, allow_nan=False).map(lambda x: round(x, 3)),
)


@given(st.integers(min_value=1, max_value=6), st.integers(min_value=0, max_value=20))
def test_a_round_times_its_windows_forwards_then_backwards_and_answers_in_order(
    windows: int, index: int
) -> None:
    called: list[int] = []

    def window(position: int) -> Callable[[], int]:
        def timed() -> int:
            called.append(position)
            return position * 10

        return timed

    results = in_turn(index, [window(position) for position in range(windows)])
    assert results == [position * 10 for position in range(windows)]
    forwards = list(range(windows))
    assert called == (forwards if index % 2 == 0 else forwards[::-1])


@given(ratios)
def test_a_spread_holds_the_median_of_its_rounds(values: list[float]) -> None:
    spread = Spread.of(values)
    ordered = sorted(values)
    k = order_statistic(len(values))
    assert spread.rounds == len(values)
    assert spread.low == round(ordered[k - 1], 3) and spread.high == round(ordered[-k], 3)
    assert spread.least == round(min(values), 3) and spread.most == round(max(values), 3)
    assert spread.median == round(statistics.median(values), 3)
    assert spread.least <= spread.low <= spread.median <= spread.high <= spread.most


def test_the_spread_of_n_rounds_is_an_interval_of_known_confidence() -> None:
    assert Spread.of([1.0]).confidence == 0.0
    assert Spread.of([1.0, 2.0, 3.0]).confidence == 0.75
    assert Spread.of([1.0] * 5).confidence == 0.9375
    assert Spread.of([1.0] * 9).confidence == pytest.approx(1 - 2 * 10 / 512)
    with pytest.raises(ValueError, match="at least one round"):
        Spread.of([])


def test_nine_rounds_give_the_second_lowest_and_second_highest() -> None:
    spread = Spread.of([0.1, 0.9, 0.5, 0.4, 0.6, 0.45, 0.55, 0.3, 0.7])
    assert (spread.low, spread.median, spread.high) == (0.3, 0.5, 0.7)
    assert (spread.least, spread.most) == (0.1, 0.9)


@given(st.integers(min_value=1, max_value=60))
def test_the_interval_is_the_narrowest_that_keeps_five_rounds_confidence(rounds: int) -> None:
    """From five rounds on, the spread's confidence never falls below the five-round range's,
    and the next order statistic inward would fall below it (or cross the median)."""
    k = order_statistic(rounds)
    if rounds >= 5:
        assert _coverage(rounds, k) >= CONFIDENCE
    else:
        assert k == 1
    assert 2 * (k + 1) > rounds or _coverage(rounds, k + 1) < CONFIDENCE


@given(ratios, targets)
def test_a_verdict_is_met_missed_or_straddles_by_its_interval(
    values: list[float], target: Target
) -> None:
    rounded = [round(value, 3) for value in values]
    spread = Spread.of(rounded)
    verdict = target.verdict(spread)
    inside = [value for value in rounded if spread.low <= value <= spread.high]
    holding = [target.holds(value) for value in inside]
    if all(holding):
        assert verdict == "met"
    elif not any(holding):
        assert verdict == "missed"
    else:
        assert verdict == "straddles"


def test_every_stated_target_parses_and_judges_its_bound() -> None:
    for text in summary.TARGETS.values():
        Target.parse(text)
    at_least = Target.parse(">= 0.5")
    assert at_least.verdict(Spread.of([0.52, 0.55, 0.6])) == "met"
    assert at_least.verdict(Spread.of([0.48, 0.52, 0.6])) == "straddles"
    assert at_least.verdict(Spread.of([0.4, 0.45])) == "missed"
    assert Target.parse("<= 3 (and linear growth)") == Target("<=", 3.0)
    with pytest.raises(ValueError, match="not a target"):
        Target.parse("linear")


def test_a_paired_ratio_prints_with_its_spread_rounds_and_verdict() -> None:
    lines = {
        **spread_lines("admission_cpu_to_floor_ratio", [2.1, 1.9, 1.95], "<= 2"),
        **spread_lines("append_cpu_ratio", [1.2, 1.1]),
        "rss_peak_ratio": 1.08,
    }
    assert lines["admission_cpu_to_floor_ratio"] == 1.95
    assert lines["admission_cpu_to_floor_ratio_spread"] == [1.9, 2.1]
    assert lines["admission_cpu_to_floor_ratio_rounds"] == 3
    assert lines["admission_cpu_to_floor_ratio_verdict"] == "straddles"
    assert "append_cpu_ratio_verdict" not in lines
    assert printed(lines, {"admission_cpu_to_floor_ratio": "<= 2"}) == [
        "admission_cpu_to_floor_ratio 1.95  spread 1.9..2.1  rounds 3  target <= 2: straddles",
        "append_cpu_ratio 1.15  spread 1.1..1.2  rounds 2",
        "rss_peak_ratio 1.08",
    ]
    nine = spread_lines("x_ratio", [0.1, 0.9, 0.5, 0.4, 0.6, 0.45, 0.55, 0.3, 0.7], ">= 0.2")
    assert nine["x_ratio_range"] == [0.1, 0.9] and nine["x_ratio_verdict"] == "met"
    assert printed(nine, {"x_ratio": ">= 0.2"}) == [
        "x_ratio 0.5  spread 0.3..0.7 (range 0.1..0.9)  rounds 9  target >= 0.2: met"
    ]


def _throughput(per_second: float, cpu_seconds: float) -> Throughput:
    """A window of 100 calls in 100 / per_second seconds that cost ``cpu_seconds`` of CPU."""
    latencies = Latencies.of([1 / per_second] * 100)
    return Throughput(8, 100, 100 / per_second, latencies, CpuUse({"x": cpu_seconds}, 0.0))


def test_the_summary_spread_is_the_spread_of_the_rounds_ratios() -> None:
    """A figure's rounds (floor, then subject, as a round measures them) become its median ratio
    with the lowest and highest round: the spread comes from the rounds themselves."""
    # (floor per second, subject per second, floor CPU, subject CPU) in each round
    rounds = [(1000, 800, 1.0, 1.2), (500, 450, 0.8, 0.9), (1000, 700, 1.0, 1.5)]

    def one_round(index: int) -> dict[str, object]:
        floor, subject, floor_cpu, subject_cpu = rounds[index]
        return floors.throughput_figure(
            _throughput(subject, subject_cpu), _throughput(floor, floor_cpu)
        )

    figure = floors.over_rounds(one_round, rounds=3)
    lines = summary.append_lines(figure)
    assert lines["append_throughput_ratio"] == 0.8
    assert lines["append_throughput_ratio_spread"] == [0.7, 0.9]
    assert lines["append_throughput_ratio_rounds"] == 3
    assert lines["append_throughput_ratio_verdict"] == "met"
    assert lines["append_cpu_ratio"] == 1.2
    assert lines["append_cpu_ratio_spread"] == [1.125, 1.5]


def test_runs_agree_when_each_median_lies_in_every_other_runs_spread() -> None:
    def run(value: float, low: float, high: float) -> dict[str, object]:
        return {
            **spread_lines("x_ratio", [low, value, high]),
            "rss_peak_ratio": value,
        }

    together = agreement([run(0.5, 0.45, 0.55), run(0.52, 0.47, 0.56), run(0.48, 0.44, 0.53)])
    assert together == {
        "x_ratio": {
            "medians": [0.5, 0.52, 0.48],
            "spreads": [[0.45, 0.55], [0.47, 0.56], [0.44, 0.53]],
            "agree": True,
            "ranges": [[0.45, 0.55], [0.47, 0.56], [0.44, 0.53]],
        }
    }
    # the second run's median lies above the third run's spread
    apart = agreement([run(0.5, 0.45, 0.55), run(0.6, 0.58, 0.62), run(0.48, 0.44, 0.53)])
    assert apart["x_ratio"]["agree"] is False
    assert medians([run(0.5, 0.4, 0.6), run(0.7, 0.6, 0.8), run(0.6, 0.5, 0.7)]) == {
        "x_ratio": 0.6,
        "rss_peak_ratio": 0.6,
    }


@given(st.lists(ratios, min_size=2, max_size=4))
def test_runs_with_the_same_rounds_always_agree(rounds: list[list[float]]) -> None:
    same = [spread_lines("x_ratio", rounds[0]) for _ in rounds]
    assert agreement(same)["x_ratio"]["agree"] is True


# A stand-in for `python -m bench` in a process of its own: writes a summary whose paired ratio
# moves with each run, as a full run writes latest.json and the plot.
FAKE_RUN = """
import json, os, pathlib
out = pathlib.Path(os.environ["FORGE_BENCH_RESULTS"])
out.mkdir(parents=True)
run = int(out.name.rsplit("-", 1)[1])
summary = {"x_ratio": 0.5 + run / 100, "x_ratio_spread": [0.45, 0.6], "x_ratio_rounds": 5,
           "rss_peak_ratio": 1.0 + run / 100}
(out / "latest.json").write_text(json.dumps({"summary": summary}))
(out / "candidate_latency.png").write_bytes(b"png")
"""


def test_repeat_runs_the_bench_in_turn_and_keeps_every_summary(tmp_path: Path) -> None:
    settled: list[int] = []

    def settle() -> dict[str, Any]:
        settled.append(len(settled) + 1)
        return {"dead_catalog_rows": float(len(settled))}

    timings = iter([{"python_to_c": float(n)} for n in range(4)])
    document = repeat([sys.executable, "-c", FAKE_RUN], 3, tmp_path, settle, lambda: next(timings))
    written = json.loads((tmp_path / "three-runs.json").read_text())
    assert written == document
    # the database was readied before each run, and what was found is kept beside the runs
    assert settled == [1, 2, 3]
    assert [before["dead_catalog_rows"] for before in written["database_before"]] == [1, 2, 3]
    # the machine timed before each run and after the last
    assert [timed["python_to_c"] for timed in written["machine"]] == [0, 1, 2, 3]
    assert [run["x_ratio"] for run in written["runs"]] == [0.51, 0.52, 0.53]
    assert written["median"] == {"x_ratio": 0.52, "rss_peak_ratio": 1.02}
    assert written["agreement"]["x_ratio"]["agree"] is True
    assert written["rss_peak_ratio_spread_over_runs"] == [1.01, 1.03]
    # the last run's results are kept
    assert json.loads((tmp_path / "latest.json").read_text())["summary"]["x_ratio"] == 0.53
    assert (tmp_path / "candidate_latency.png").read_bytes() == b"png"
