"""How many trials a reliability scenario runs, and how it reports its figures.

``make test`` runs a fast slice of every scenario (seconds each); ``make reliability`` sets
``FORGE_RELIABILITY_SCALE=full`` and runs the counts recorded in docs/reliability.md.
Figures go to stdout (``-s`` shows them) and, when ``FORGE_RELIABILITY_RESULTS`` names a file,
are appended to it as one JSON object per line.
"""

from __future__ import annotations

import json
import os
import time

FULL = os.environ.get("FORGE_RELIABILITY_SCALE", "fast") == "full"


def scale(fast: int, full: int) -> int:
    """The count of this run: ``full`` under ``FORGE_RELIABILITY_SCALE=full``, else ``fast``."""
    return full if FULL else fast


def report(scenario: str, **figures: object) -> None:
    """Print one line of figures and append it to the results file, if one is named."""
    line = " ".join(f"{key}={value}" for key, value in figures.items())
    print(f"\nRELIABILITY {scenario} scale={'full' if FULL else 'fast'} {line}", flush=True)
    results = os.environ.get("FORGE_RELIABILITY_RESULTS")
    if results:
        record = {"scenario": scenario, "scale": "full" if FULL else "fast", **figures}
        record["at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with open(results, "a", encoding="utf-8") as sink:
            sink.write(json.dumps(record, default=str) + "\n")
