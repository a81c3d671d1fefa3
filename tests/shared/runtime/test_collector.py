"""A service process's collector settings (in a process of its own: they are process-wide)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from shared.runtime.collector import OLDER_THRESHOLDS, YOUNG_THRESHOLD

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import gc, json
from shared.runtime.collector import tune_for_service
before = gc.get_threshold()
held = [[n] for n in range(1000)]  # startup's objects, as a service's would be
tune_for_service()
print(json.dumps({"before": before, "after": gc.get_threshold(), "frozen": gc.get_freeze_count()}))
"""


def test_tuning_freezes_what_startup_allocated_and_collects_the_young_generation_less_often() -> (
    None
):
    found = json.loads(
        subprocess.run(
            [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    )
    assert found["before"] == [700, 10, 10]  # CPython's defaults, which the service replaces
    assert found["after"] == [YOUNG_THRESHOLD, *OLDER_THRESHOLDS]
    assert found["frozen"] >= 1000  # at least the probe's own objects are frozen
