"""Paired, interleaved rounds and the spread of their ratios (issue 50 §1).

A ratio whose two halves are measured minutes apart inherits the machine's phases: on the bench's
two shared cores the same floor has moved by half between runs. So every targeted ratio is
measured in rounds, each timing the floor and the subject back to back on the same running
services (anything a round prepares, such as seeding held runs, is done before its first timed
window), and the figure is the median of the per-round ratios with their spread.

The windows of a round run in the declared order in even rounds and in the reverse order in odd
ones (ABBA): a machine that drifts steadily then favours the floor in one round and the subject
in the next, instead of the same side every time, so the drift widens the spread instead of
moving the median.

The spread is a distribution-free interval for the median ratio: the k-th lowest and k-th highest
per-round ratio, each round falling either side of the median with probability one half, so it
holds the median with confidence 1 - 2 P(Binomial(n, 1/2) <= k - 1). k is the largest that keeps
that confidence at least CONFIDENCE, the 93.75 % that five rounds' lowest and highest have: at
up to eight rounds the spread is the lowest and highest round (75 % at 3, 93.75 % at 5, 99.2 %
at 8); at nine the second lowest and second highest (96.1 %); at twelve the third (96.1 %).
More rounds therefore narrow the spread at the same confidence instead of widening it (ADR
0063). The lowest and highest round are kept beside it as the range. A figure whose spread has
values on both sides of its target "straddles" it: this run cannot say whether the target is
met.
"""

from __future__ import annotations

import math
import operator
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

T = TypeVar("T")
Verdict = Literal["met", "missed", "straddles"]


def in_turn(index: int, windows: Sequence[Callable[[], T]]) -> list[T]:
    """Run ``windows`` one after the other, forwards in even rounds and backwards in odd ones;
    the results come back in the declared order either way."""
    order = range(len(windows)) if index % 2 == 0 else range(len(windows) - 1, -1, -1)
    results: dict[int, T] = {}
    for position in order:
        results[position] = windows[position]()
    return [results[position] for position in range(len(windows))]


#: The confidence every spread keeps at least, once it has rounds enough: that of five rounds'
#: lowest and highest (1 - 2^-4).
CONFIDENCE = 0.9375


def _coverage(rounds: int, k: int) -> float:
    """The confidence with which the k-th lowest and k-th highest of ``rounds`` values hold their
    distribution's median: one minus the chance that k - 1 or fewer fall on one side."""
    tail = sum(math.comb(rounds, below) for below in range(k)) / 2.0**rounds
    return 1.0 - 2.0 * tail


def order_statistic(rounds: int) -> int:
    """k: the spread of ``rounds`` values runs from the k-th lowest to the k-th highest, the
    largest k whose coverage is at least CONFIDENCE (1 when even the range falls short)."""
    k = 1
    while 2 * (k + 1) <= rounds and _coverage(rounds, k + 1) >= CONFIDENCE:
        k += 1
    return k


@dataclass(frozen=True)
class Spread:
    """The median of per-round values, its interval (module doc), the lowest and highest, and
    how many rounds."""

    median: float
    low: float
    high: float
    rounds: int
    least: float
    most: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise ValueError("a spread needs at least one round")
        ordered = sorted(float(value) for value in values)
        k = order_statistic(len(ordered))
        return cls(
            round(statistics.median(ordered), 3),
            round(ordered[k - 1], 3),
            round(ordered[-k], 3),
            len(ordered),
            round(ordered[0], 3),
            round(ordered[-1], 3),
        )

    @property
    def confidence(self) -> float:
        """The confidence with which [low, high] holds the median of the rounds' distribution."""
        return _coverage(self.rounds, order_statistic(self.rounds))

    def as_dict(self) -> dict[str, Any]:
        return {
            "median": self.median,
            "spread": [self.low, self.high],
            "range": [self.least, self.most],
            "rounds": self.rounds,
            "confidence": round(self.confidence, 4),
        }


_COMPARISONS: Mapping[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}
_TARGET = re.compile(r"^\s*(>=|<=|>|<)\s*([0-9]*\.?[0-9]+)")


@dataclass(frozen=True)
class Target:
    """A target as the bench states it: ">= 0.5", "<= 3 (and linear growth)"; only the leading
    comparison is checked."""

    comparison: str
    bound: float

    @classmethod
    def parse(cls, text: str) -> Target:
        found = _TARGET.match(text)
        if found is None:
            raise ValueError(f"not a target: {text!r}")
        return cls(found.group(1), float(found.group(2)))

    def holds(self, value: float) -> bool:
        return _COMPARISONS[self.comparison](value, self.bound)

    def verdict(self, spread: Spread) -> Verdict:
        """Met when every round meets the target, missed when none does, else straddles (the
        comparisons are monotone, so the spread's ends decide)."""
        ends = (self.holds(spread.low), self.holds(spread.high))
        if all(ends):
            return "met"
        return "missed" if not any(ends) else "straddles"


def spread_lines(key: str, values: Sequence[float], target: str | None = None) -> dict[str, Any]:
    """The summary lines of one paired ratio: the median of the rounds under ``key``, then
    ``<key>_spread`` [low, high] (the median's interval), ``<key>_range`` [lowest, highest
    round] and ``<key>_rounds``, and with a target ``<key>_verdict``."""
    spread = Spread.of(values)
    lines: dict[str, Any] = {
        key: spread.median,
        f"{key}_spread": [spread.low, spread.high],
        f"{key}_range": [spread.least, spread.most],
        f"{key}_rounds": spread.rounds,
    }
    if target is not None:
        lines[f"{key}_verdict"] = Target.parse(target).verdict(spread)
    return lines


SUFFIXES = ("_spread", "_range", "_rounds", "_verdict")


def printed(lines: Mapping[str, Any], targets: Mapping[str, str]) -> list[str]:
    """One printed line per figure: a paired ratio with its spread, rounds and, when it has a
    target, the target and the verdict; every other key as ``name value``."""
    out = []
    for name, value in lines.items():
        if name.endswith(SUFFIXES) and name.rsplit("_", 1)[0] in lines:
            continue
        text = f"{name} {value}"
        if f"{name}_spread" in lines:
            low, high = lines[f"{name}_spread"]
            text += f"  spread {low}..{high}"
            if f"{name}_range" in lines and lines[f"{name}_range"] != [low, high]:
                least, most = lines[f"{name}_range"]
                text += f" (range {least}..{most})"
            text += f"  rounds {lines[f'{name}_rounds']}"
        if f"{name}_verdict" in lines:
            text += f"  target {targets[name]}: {lines[f'{name}_verdict']}"
        out.append(text)
    return out
