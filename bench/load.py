"""Concurrent callers and the statistics every figure reports (medians and ranges, not single
absolute times: the machine is shared and noisy)."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bench.cpu import CpuReading, CpuUse
from bench.paired import in_turn


@dataclass(frozen=True)
class Latencies:
    """Latency statistics in milliseconds."""

    count: int
    p50_ms: float
    p99_ms: float
    min_ms: float
    max_ms: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Latencies:
        ordered = sorted(seconds)
        if not ordered:
            return cls(0, 0.0, 0.0, 0.0, 0.0)

        def at(fraction: float) -> float:
            return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))] * 1000

        return cls(len(ordered), at(0.5), at(0.99), ordered[0] * 1000, ordered[-1] * 1000)

    def as_dict(self) -> dict[str, float]:
        return {
            "count": self.count,
            "p50_ms": round(self.p50_ms, 3),
            "p99_ms": round(self.p99_ms, 3),
            "min_ms": round(self.min_ms, 3),
            "max_ms": round(self.max_ms, 3),
        }


@dataclass(frozen=True)
class Throughput:
    """What ``callers`` concurrent loops achieved: calls per second and per-call latency."""

    callers: int
    calls: int
    seconds: float
    latencies: Latencies
    # CPU spent in the timed window (None when no processes were named to watch).
    cpu: CpuUse | None = None

    @property
    def per_second(self) -> float:
        return self.calls / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "callers": self.callers,
            "calls": self.calls,
            "seconds": round(self.seconds, 3),
            "per_second": round(self.per_second, 2),
            "latency": self.latencies.as_dict(),
            **({"cpu_ms_per_call": self.cpu.per_call_ms(self.calls)} if self.cpu else {}),
        }

    @property
    def cpu_ms_per_call(self) -> float:
        return 1000 * self.cpu.attributed / self.calls if self.cpu and self.calls else 0.0


def run_concurrently(
    callers: Sequence[Callable[[int], None]],
    calls_each: int,
    watch: Mapping[str, int] | None = None,
) -> Throughput:
    """Each caller (one thread) is called with 0..calls_each-1; all start together. With
    ``watch`` (name → pid) the CPU of those processes, of PostgreSQL, of this process and of the
    machine over the timed window is recorded too."""
    samples: list[list[float]] = [[] for _ in callers]
    errors: list[BaseException] = []
    start = threading.Barrier(len(callers) + 1)

    def loop(index: int) -> None:
        start.wait()
        try:
            for n in range(calls_each):
                began = time.perf_counter()
                callers[index](n)
                samples[index].append(time.perf_counter() - began)
        except Exception as error:  # noqa: BLE001 - re-raised on the calling thread
            errors.append(error)

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(len(callers))]
    for thread in threads:
        thread.start()
    before = CpuReading.now(watch) if watch is not None else None
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    cpu = CpuUse.between(before, CpuReading.now(watch)) if watch is not None and before else None
    if errors:
        raise errors[0]
    flat = [s for per_caller in samples for s in per_caller]
    return Throughput(len(callers), len(flat), elapsed, Latencies.of(flat), cpu)


def timed(action: Callable[[], object], repeats: int) -> Latencies:
    """Sequential latencies of ``repeats`` calls."""
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        action()
        samples.append(time.perf_counter() - began)
    return Latencies.of(samples)


def alternated_samples(
    action: Callable[[], object], baseline: Callable[[], object], repeats: int
) -> tuple[list[float], list[float]]:
    """Sequential durations in seconds of ``repeats`` calls of each, one of each in turn (the
    action first in even repeats, the baseline first in odd ones: bench.paired.in_turn): the
    ratio of each pair then compares calls made under the same machine conditions (on a shared
    machine the same code's speed drifts by tens of percent within a minute)."""

    def duration(call: Callable[[], object]) -> Callable[[], float]:
        def timed_call() -> float:
            began = time.perf_counter()
            call()
            return time.perf_counter() - began

        return timed_call

    samples: tuple[list[float], list[float]] = ([], [])
    for index in range(repeats):
        measured, base = in_turn(index, [duration(action), duration(baseline)])
        samples[0].append(measured)
        samples[1].append(base)
    return samples


def ratio(value: float, baseline: float) -> float:
    return round(value / baseline, 3) if baseline else 0.0


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0
