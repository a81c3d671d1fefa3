"""How fast the machine runs interpreted Python right now, against C (issue 50: ratios that drift).

On the bench's machine (two virtual cores) the same millisecond of interpreted loop has taken
from 0.93 to 1.8 ms of CPU within one second, in phases from milliseconds to seconds, while a
SHA-256 in C slowed by 5 % at most over the same chunks: interference from outside the machine
that hits the interpreter's branchy code far more than C's tight loops. A figure whose subject
is more Python than its floor (every service against a bare server; a Python ledger against
PostgreSQL's C) then moves with the share of slow phases its windows happen to catch.

``sample`` alternates fixed chunks of both for a couple of seconds, each timed on this thread's
own CPU clock (so waiting for a core does not count, only how fast the core runs it), and reports
each pair's interpreted time over its C time, C being the steady yardstick: its 10th, 50th and
90th percentiles (``python_to_c_p10`` …), which sit near 1.7 in the fast phase here and near 2.7
to 3.0 in the slow one, and the share of pairs at least ``SLOW`` times the sample's 10th
percentile (``slow_share``: meaningful when the sample caught both phases; a sample all in one
phase shows it in its percentiles).
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Sequence

# About 1 ms of interpreted loop, and about 0.6 ms of SHA-256, on a fast phase here.
PYTHON_ITERATIONS = 30_000
HASHED = bytes(range(256)) * 4096  # 1 MiB
SAMPLE_SECONDS = 2.0
# A pair this many times the sample's 10th percentile ran in a slow phase (the two levels seen
# here are about 1.7 and 2.7 to 3.0).
SLOW = 1.4


def _python_chunk() -> int:
    total = 0
    for value in range(PYTHON_ITERATIONS):
        total += value % 7
    return total


def _c_chunk() -> bytes:
    return hashlib.sha256(HASHED).digest()


def _quantile(ordered: Sequence[float], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def slowdowns(python: Sequence[float], c: Sequence[float]) -> dict[str, float]:
    """The summary of interleaved chunk times in ms, pair by pair: each kind's median chunk, the
    percentiles of interpreted time over C time, and the share of slow pairs."""
    if not python or len(python) != len(c):
        raise ValueError("a machine sample needs pairs of chunks, one of each kind")
    pairs = sorted(one / other for one, other in zip(python, c, strict=True))
    fast = _quantile(pairs, 0.1)
    return {
        "python_chunk_ms_p50": round(statistics.median(python), 3),
        "c_chunk_ms_p50": round(statistics.median(c), 3),
        "python_to_c_p10": round(fast, 3),
        "python_to_c_p50": round(_quantile(pairs, 0.5), 3),
        "python_to_c_p90": round(_quantile(pairs, 0.9), 3),
        "slow_share": round(sum(value >= SLOW * fast for value in pairs) / len(pairs), 3),
    }


def sample(seconds: float = SAMPLE_SECONDS) -> dict[str, float]:
    """Chunks of interpreted loop and of SHA-256 in turn for ``seconds``, each timed on this
    thread's CPU clock, summarized by ``slowdowns``."""
    python: list[float] = []
    c: list[float] = []
    ends = time.perf_counter() + seconds
    while time.perf_counter() < ends or not python:
        started = time.thread_time()
        _python_chunk()
        between = time.thread_time()
        _c_chunk()
        python.append(1000 * (between - started))
        c.append(1000 * (time.thread_time() - between))
    found = slowdowns(python, c)
    found["chunks"] = len(python)
    return found
