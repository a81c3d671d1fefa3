"""How many trials a reliability scenario runs, and how it reports its figures.

``make test`` runs a fast slice of every scenario (seconds each); ``make reliability`` sets
``FORGE_RELIABILITY_SCALE=full`` and runs the counts recorded in docs/reliability.md.
Figures go to stdout (``-s`` shows them) and, when ``FORGE_RELIABILITY_RESULTS`` names a file,
are appended to it as one JSON object per line. :class:`Counts` is the same rule under other
variables (the replica scenarios of tests/scale use ``FORGE_SCALE``).
"""

from __future__ import annotations

import json
import os
import time


class Counts:
    """Fast or full counts, chosen by ``scale_variable``; figures printed under ``label``."""

    def __init__(self, scale_variable: str, results_variable: str, label: str) -> None:
        self.full = os.environ.get(scale_variable, "fast") == "full"
        self.results_variable = results_variable
        self.label = label

    def scale(self, fast: int, full: int) -> int:
        """The count of this run: ``full`` under the full scale, else ``fast``."""
        return full if self.full else fast

    def report(self, scenario: str, **figures: object) -> None:
        """Print one line of figures and append it to the results file, if one is named."""
        size = "full" if self.full else "fast"
        line = " ".join(f"{key}={value}" for key, value in figures.items())
        print(f"\n{self.label} {scenario} scale={size} {line}", flush=True)
        results = os.environ.get(self.results_variable)
        if results:
            record = {"scenario": scenario, "scale": size, **figures}
            record["at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            with open(results, "a", encoding="utf-8") as sink:
                sink.write(json.dumps(record, default=str) + "\n")


RELIABILITY = Counts("FORGE_RELIABILITY_SCALE", "FORGE_RELIABILITY_RESULTS", "RELIABILITY")
FULL = RELIABILITY.full
scale = RELIABILITY.scale
report = RELIABILITY.report
