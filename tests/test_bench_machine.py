"""The machine's sample (bench.machine): how much slower than its best the machine runs
interpreted Python and C right now. `make bench-repeat` records one before every run, so a
ratio that drifts can be set beside the slow phases the machine was in."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.machine import SLOW, sample, slowdowns

chunks = st.lists(st.floats(min_value=0.1, max_value=10.0), min_size=1, max_size=50)


def test_slow_phases_are_counted_against_the_fastest_chunk() -> None:
    # four interpreted chunks on the fast level, one on the slow level (1.75 times); C steady
    found = slowdowns([1.0, 1.0, 1.02, 1.75, 1.0], [0.6, 0.6, 0.61, 0.63, 0.6])
    assert found["python_slowdown_p50"] == 1.0
    assert found["python_slowdown_p90"] == 1.75
    assert found["python_slow_share"] == 0.2
    assert found["c_slowdown_p90"] == 1.05
    assert found["python_to_c"] == round(1.0 / 0.6, 4)
    assert found["python_chunk_best"] == 1.0


@given(chunks, chunks)
def test_a_summary_is_ordered_and_bounded(python: list[float], c: list[float]) -> None:
    found = slowdowns(python, c)
    assert 1.0 <= found["python_slowdown_p50"] <= found["python_slowdown_p90"]
    assert 1.0 <= found["c_slowdown_p50"] <= found["c_slowdown_p90"]
    assert 0.0 <= found["python_slow_share"] <= 1.0
    # every chunk at least SLOW times the fastest is counted, and no other
    expected = sum(value / min(python) >= SLOW for value in python) / len(python)
    assert found["python_slow_share"] == round(expected, 3)


def test_a_sample_needs_both_kinds() -> None:
    with pytest.raises(ValueError):
        slowdowns([], [1.0])


def test_the_machine_is_sampled_in_both_kinds_on_this_threads_clock() -> None:
    found = sample(0.05)
    assert found["chunks"] >= 1
    assert found["python_chunk_best"] > 0
    assert found["python_slowdown_p50"] >= 1.0 and found["c_slowdown_p50"] >= 1.0
