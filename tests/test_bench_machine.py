"""The machine's sample (bench.machine): how much slower than its best the machine runs
interpreted Python and C right now. `make bench-repeat` records one before every run, so a
ratio that drifts can be set beside the slow phases the machine was in."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.machine import sample, slowdowns


def test_slow_pairs_are_counted_against_the_fast_level() -> None:
    # C steady at 0.6 ms; interpreted chunks at the fast level (1.0 ms) but for two at 1.75 ms
    python = [1.0] * 8 + [1.75, 1.75]
    found = slowdowns(python, [0.6] * 10)
    assert found["python_to_c_p10"] == round(1.0 / 0.6, 3)
    assert found["python_to_c_p50"] == round(1.0 / 0.6, 3)
    assert found["python_to_c_p90"] == round(1.75 / 0.6, 3)
    assert found["slow_share"] == 0.2
    assert found["python_chunk_ms_p50"] == 1.0 and found["c_chunk_ms_p50"] == 0.6


def test_a_slow_phase_is_seen_against_c_even_when_it_lasts_the_whole_sample() -> None:
    fast = slowdowns([1.0] * 10, [0.6] * 10)
    slow = slowdowns([1.75] * 10, [0.62] * 10)
    assert slow["python_to_c_p50"] > 1.6 * fast["python_to_c_p50"]
    assert slow["slow_share"] == fast["slow_share"] == 0.0


@given(st.lists(st.tuples(st.floats(0.1, 10.0), st.floats(0.1, 10.0)), min_size=1, max_size=50))
def test_a_summary_is_ordered_and_bounded(pairs: list[tuple[float, float]]) -> None:
    python, c = [one for one, _ in pairs], [other for _, other in pairs]
    found = slowdowns(python, c)
    assert found["python_to_c_p10"] <= found["python_to_c_p50"] <= found["python_to_c_p90"]
    assert 0.0 <= found["slow_share"] <= 0.9  # the fastest tenth is never slow against itself


def test_a_sample_needs_pairs() -> None:
    with pytest.raises(ValueError):
        slowdowns([], [])
    with pytest.raises(ValueError):
        slowdowns([1.0], [1.0, 1.0])


def test_the_machine_is_sampled_in_both_kinds_on_this_threads_clock() -> None:
    found = sample(0.05)
    assert found["chunks"] >= 1
    assert found["python_chunk_ms_p50"] > 0 and found["c_chunk_ms_p50"] > 0
    assert 0 < found["python_to_c_p10"] <= found["python_to_c_p90"]
