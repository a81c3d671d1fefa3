"""The slicing experiment (bench.slicing): each scheme's ratio is the subject's calls per second
over the floor's, a sliced round summing each side's calls and time over its slices."""

from __future__ import annotations

import pytest

from bench import figures
from bench.load import Latencies, Throughput
from bench.slicing import appends_beside_baseline, compare, sliced_ratio, spread
from bench.stack import baseline_server, services
from tests.conftest import postgres_schema
from tests.support import owner_url


def _throughput(calls: int, seconds: float) -> Throughput:
    return Throughput(8, calls, seconds, Latencies.of([0.001] * calls))


def test_a_sliced_ratio_sums_each_side_before_dividing() -> None:
    # floor: 300 calls in 1.5 s (200/s); subject: 300 calls in 3 s (100/s): 0.5, although the
    # slices' own ratios are 1.0 and 0.25
    pairs = [
        (_throughput(100, 1.0), _throughput(100, 1.0)),
        (_throughput(200, 0.5), _throughput(200, 2.0)),
    ]
    assert sliced_ratio(pairs) == pytest.approx(0.5)


def test_a_spread_reports_the_rounds_as_they_came() -> None:
    found = spread([0.7, 0.5, 0.9, 0.6])
    assert found["median"] == 0.65 and found["range"] == [0.5, 0.9]
    assert found["values"] == [0.7, 0.5, 0.9, 0.6]


@pytest.mark.timeout(300)
def test_both_schemes_time_every_call_on_real_servers() -> None:
    with postgres_schema() as url, baseline_server(owner_url(url)) as baseline, services(url) as up:
        clients = figures.Clients(up)
        floor, subject = appends_beside_baseline(baseline, clients)
        timed: list[int] = []

        def counted(calls: int, prefix: str) -> Throughput:
            measured = subject(calls, prefix)
            timed.append(measured.calls)
            return measured

        found = compare(floor, counted, rounds=1, calls=4, slices=2)
    # one whole window of 4 calls a caller, then two slices of 2
    assert timed == [4 * figures.CALLERS, 2 * figures.CALLERS, 2 * figures.CALLERS]
    assert found["whole"]["median"] > 0 and found["sliced"]["median"] > 0
