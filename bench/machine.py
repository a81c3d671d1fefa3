"""How fast the machine runs interpreted Python right now, against C (issue 50: ratios that drift).

On the bench's machine (two virtual cores) the same millisecond of interpreted loop has taken
from 0.93 to 1.8 ms of CPU within one second, in phases from milliseconds to seconds, while a
SHA-256 in C slowed by 5 % at most over the same chunks: interference from outside the machine
that hits the interpreter's branchy code far more than C's tight loops. A figure whose subject
is more Python than its floor (every service against a bare server; a Python ledger against
PostgreSQL's C) then moves with the share of slow phases its windows happen to catch.

``sample`` alternates fixed chunks of both for a couple of seconds and measures each on this
thread's own CPU clock (so waiting for a core does not count, only how fast the core runs it),
then reports each chunk's slowdown against the fastest of its kind: the median and 90th
percentile, and the share of interpreted chunks at least ``SLOW`` times their fastest.
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
# An interpreted chunk this many times slower than the fastest ran in a slow phase (the two
# levels seen here are about 1.0 and 1.75).
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
    """The summary of interleaved chunk times (any unit): each kind's median and 90th-percentile
    slowdown against its fastest chunk, the share of slow interpreted chunks, the fastest
    interpreted chunk, and the ratio of the two kinds' medians."""
    if not python or not c:
        raise ValueError("a machine sample needs chunks of both kinds")
    fastest_python, fastest_c = min(python), min(c)
    python_slow = sorted(value / fastest_python for value in python)
    c_slow = sorted(value / fastest_c for value in c)
    return {
        "python_chunk_best": round(fastest_python, 6),
        "python_slowdown_p50": round(_quantile(python_slow, 0.5), 3),
        "python_slowdown_p90": round(_quantile(python_slow, 0.9), 3),
        "c_slowdown_p50": round(_quantile(c_slow, 0.5), 3),
        "c_slowdown_p90": round(_quantile(c_slow, 0.9), 3),
        "python_slow_share": round(sum(value >= SLOW for value in python_slow) / len(python), 3),
        "python_to_c": round(statistics.median(python) / statistics.median(c), 4),
    }


def sample(seconds: float = SAMPLE_SECONDS) -> dict[str, float]:
    """Chunks of interpreted loop and of SHA-256 in turn for ``seconds``, each timed on this
    thread's CPU clock, summarized by ``slowdowns`` (``python_chunk_best`` in ms)."""
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
