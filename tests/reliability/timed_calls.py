"""Legitimate callers beside an attack (scenarios 10 and 10b): each caller's calls timed, their
outcomes counted, and the p99 the scenarios compare with the unloaded one."""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable

import grpc


def p99(latencies: list[float]) -> float:
    return statistics.quantiles(latencies, n=100)[98] if len(latencies) > 1 else latencies[0]


def timed_calls(
    callers: int,
    connect: Callable[[int], Callable[[int], object]],
    calls: int,
    codes: Counter[str],
) -> list[float]:
    """``callers`` threads at once: thread ``n`` runs ``connect(n)`` once, untimed (its channel,
    its requests), then times the call it returned ``calls`` times, given the call's index.
    Returns every call's latency; each outcome (``OK`` or the status code's name) is counted in
    ``codes``."""
    latencies: list[float] = []
    lock = threading.Lock()

    def caller(n: int) -> None:
        call = connect(n)
        for index in range(calls):
            started = time.perf_counter()
            try:
                call(index)
                code = "OK"
            except grpc.RpcError as error:
                code = error.code().name  # type: ignore[attr-defined]
            with lock:
                latencies.append(time.perf_counter() - started)
                codes[code] += 1

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies
