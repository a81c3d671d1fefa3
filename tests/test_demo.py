"""`make demo` is the main job shown: it must run the whole v1 story and exit 0."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_demo_tells_the_whole_v1_story(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}:{ROOT / 'shared' / 'gen'}",
        # Never reuse services a developer may have running: the demo starts its own.
        "FORGE_LEDGER_TARGET": "127.0.0.1:1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "services.demo", "--run-id", "demo-test"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for line in (
        "ok  the candidate is eligible (no holds)",
        "ok  idempotent: no second ticket",
        "ok  command ledger still at 11 of 22 after admission",
        "ok  the worker completed the request",
        "ok  six provider requests, each with the consumed response once in its history",
        "completion records both verdicts apart",
        "ok  the run's completed-round count advanced to 1",
        "ok  command ledger at 13 of 22, the old eleven receipts unchanged",
        "ok  the 23rd command is refused before it runs",
        "ok  hash chain verifies",
        "The v1 story behaved as the spec says.",
        "ok  eligible: the native history proves no worker ever claimed it",
        "ok  the same request and attempt are queued again",
        "ok  idempotent: no second witness",
        "ok  another recovery id cannot replace the witness",
        "The never-claimed recovery story behaved as the spec says.",
        "ok  eligible: the sealed reproduction gives the bytes the provider refused, as retained",
        "ok  a refusal settlement is recorded and the same request is queued again",
        "ok  idempotent: no second settlement",
        "ok  a second refusal stays held",
        "ok  no retry loop: the one action is spent",
        "The rejected-boundary recovery story behaved as the spec says.",
        "ok  the request stays claimed: a claimed ticket is never requeued automatically",
        "ok  a timeout or a missing result proves nothing: the retry is held until verified",
        "is alive: refused",
        "ok  cessation of exactly that process is proven; every intended effect has its outcome",
        "ok  the old claim is released and fenced; a new execution request, same attempt",
        "ok  nothing refunded: 12 stays charged, the retry makes 14",
        "ok  late Complete under generation 1: LEASE_FENCED_BY_RECONCILIATION",
        "The reconciliation story behaved as the spec says.",
        "ok  eligible: exact read custody; the sealed SDK reconstructs the consumed turn",
        "ok  the same request is queued again from a separate derived checkpoint",
        "ok  the evidence observation is explicitly unavailable; the listing is reused exactly",
        "ok  no command is charged",
        "ok  idempotent: no second witness",
        "The read-only observation recovery story behaved as the spec says.",
        "ok  one flipped byte in entry 3 is named: hash_mismatch at sequence 3",
        "The offline audit behaved as the spec says.",
        # the demo turned the policy and two recovery switches on: it puts revision 1 back
        "Restored the policy flags of revision 1 as revision",
    ):
        assert line in done.stdout, done.stdout
    # One console link per run it created, on the gateway of the services it started.
    for suffix in ("", "-recovery", "-refusal", "-reconcile", "-observation"):
        assert re.search(rf"http://127\.0\.0\.1:\d+/console/runs/demo-test{suffix}\n", done.stdout)
    assert "These links work only while the demo runs" in done.stdout
