"""``python -m bench.reconstruction_isolation``: the cost per computation of the ways ADR 0048
weighed to bound reconstruction's work on a caller's bytes.

One typical reconstruction (the ``v1_basic`` held run, version 1) and its analysis, each computed
``CALLS`` times (the content cache is not involved): in the service process (before), in a warm
worker process of ``IsolatedRunner`` (chosen), and the start of a fresh worker process (what a
child process per computation would add to each one). Printed as JSON: the median milliseconds of
each, and the measured memory each result holds beside what the cache counted before.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from services.reconstruction.domain import analyze_consumed_response, reconstruct_invalid_read
from services.reconstruction.isolation import IsolatedRunner
from shared.runtime.memory_size import held_bytes

CALLS = 15
CASE = Path(__file__).resolve().parents[1] / "tests" / "data" / "fixtures" / "v1_basic"


def _median_ms(compute: Callable[[], Any], calls: int = CALLS) -> float:
    spent = []
    for _ in range(calls):
        started = time.perf_counter()
        compute()
        spent.append(time.perf_counter() - started)
    return round(statistics.median(spent) * 1000, 2)


def main() -> int:
    checkpoint = (CASE / "checkpoint.json").read_bytes()
    raw = (CASE / "raw_response.json").read_bytes()
    consumed_at = json.loads((CASE.parent / "manifest.json").read_text())["v1_basic"]["consumed_at"]
    work: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
        "reconstruct": (reconstruct_invalid_read, (checkpoint, raw, 1, consumed_at)),
        "analyze": (analyze_consumed_response, (checkpoint, raw)),
    }
    started = time.perf_counter()
    runner = IsolatedRunner(1, 60.0)
    runner.run(analyze_consumed_response, checkpoint, raw)  # waits for the worker's start
    start_ms = round((time.perf_counter() - started) * 1000, 1)
    figure: dict[str, Any] = {"fresh_worker_start_ms": start_ms}
    for name, (function, args) in work.items():
        function(*args)  # warm, as a running service is
        runner.run(function, *args)
        result = function(*args)
        figure[name] = {
            "in_process_ms": _median_ms(partial(function, *args)),
            "worker_process_ms": _median_ms(partial(runner.run, function, *args)),
            "result_held_bytes": held_bytes(result),
        }
    figure["reconstruct"]["cache_counted_before_bytes"] = 2 * (len(checkpoint) + len(raw))
    figure["analyze"]["cache_counted_before_bytes"] = len(raw)
    runner.close()
    json.dump(figure, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
