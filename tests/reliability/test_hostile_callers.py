"""Scenario 10: hostile callers on the wire (ADR 0040, ADR 0041).

Eight legitimate callers read a run (`GetRun`) three times: unloaded; while strangers open calls
with no token and never send their body and other strangers send 30 MiB bodies with no token;
and while a reader inspects a run whose payloads are the screening rules' worst case (64 KiB of
``a-a-…`` in every entry). Invariant: every legitimate call succeeds, every stranger is refused
UNAUTHENTICATED, each inspection finishes within 1 s, 0 UNKNOWN/INTERNAL, the process's RSS stays
bounded. The legitimate callers' p99 under each attack over the unloaded p99 is reported (the
issue's bound: within 2×). The strangers run as a process of their own
(tests/reliability/strangers.py), as an attacker would; the inspecting reader shares the
server's process (its cost is the server's).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import grpc

from forge.continuity.v1 import inspection_pb2, ledger_pb2
from services.demo.seed import load_fixture, seed_held_run
from tests.ledger.conftest import LedgerClients
from tests.reliability.scale import report, scale
from tests.reliability.timed_calls import p99, timed_calls

CALLERS = 8
CALLS = scale(fast=25, full=200)
SILENT = scale(fast=40, full=200)
BODIES = scale(fast=4, full=32)
BODY_BYTES = 30 << 20
HOSTILE_NOTE = "a-" * 32768  # 64 KiB on which the backtracking rules spent seconds
FORBIDDEN = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
RSS_BOUND_MIB = 512


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _legitimate_round(clients: LedgerClients, codes: Counter[str]) -> list[float]:
    def connect(_n: int) -> Callable[[int], object]:
        ledger = clients.ledger("reader-token")
        return lambda _call: ledger.GetRun(ledger_pb2.GetRunRequest(run_id="run-1"), timeout=10)

    return timed_calls(CALLERS, connect, CALLS, codes)


def _inspections(clients: LedgerClients, seconds: list[float], stop: threading.Event) -> None:
    reader = clients.ledger("reader-token")
    while not stop.is_set():
        started = time.perf_counter()
        report_ = reader.InspectJournal(
            inspection_pb2.InspectJournalRequest(run_id="run-hostile"), timeout=30
        )
        seconds.append(time.perf_counter() - started)
        assert report_.credential_finding_count == 0


def test_strangers_and_hostile_payloads_do_not_slow_legitimate_callers(
    clients: LedgerClients,
) -> None:
    fixture = load_fixture("v1_basic")
    seed_held_run(clients.ledger(), fixture, "run-1")

    def hostile(
        entries: list[tuple[int, dict[str, object]]],
    ) -> list[tuple[int, dict[str, object]]]:
        return [(kind, {**payload, "note": HOSTILE_NOTE}) for kind, payload in entries]

    seed_held_run(clients.ledger(), fixture, "run-hostile", edit=hostile)
    baseline_codes: Counter[str] = Counter()
    _legitimate_round(clients, baseline_codes)  # warm-up: connections, caches
    unloaded = _legitimate_round(clients, baseline_codes)

    rss_before = _rss_mib()
    attacked_codes: Counter[str] = Counter()
    stranger_codes: Counter[str] = Counter()
    body_codes: Counter[str] = Counter()
    stop = threading.Event()
    counts = (str(SILENT), str(BODIES), str(BODY_BYTES))
    attackers = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.strangers", clients.served.target, *counts],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert attackers.stdin is not None and attackers.stdout is not None
    try:
        assert attackers.stdout.readline().strip() == "ready"
        strangers_round = _legitimate_round(clients, attacked_codes)
        attackers.stdin.close()
        ended = json.loads(attackers.stdout.readline())
    finally:
        attackers.kill()
        attackers.wait(timeout=30)
    stranger_codes.update(ended["silent"])
    body_codes.update(ended["bodies"])
    inspection_seconds: list[float] = []
    inspector = threading.Thread(target=_inspections, args=(clients, inspection_seconds, stop))
    inspector.start()
    inspected_round = _legitimate_round(clients, attacked_codes)
    stop.set()
    inspector.join(60)
    rss_growth = _rss_mib() - rss_before

    unloaded_p99 = p99(unloaded)
    strangers_p99, inspected_p99 = p99(strangers_round), p99(inspected_round)
    report(
        "hostile_callers",
        legitimate_calls=len(strangers_round) + len(inspected_round),
        silent_strangers=SILENT,
        large_bodies=BODIES,
        body_mib=BODY_BYTES >> 20,
        stranger_codes=json.dumps(dict(stranger_codes)),
        body_codes=json.dumps(dict(body_codes)),
        legitimate_codes=json.dumps(dict(attacked_codes)),
        unloaded_p99_ms=round(unloaded_p99 * 1000, 1),
        strangers_p99_ms=round(strangers_p99 * 1000, 1),
        strangers_p99_ratio=round(strangers_p99 / unloaded_p99, 2),
        inspections=len(inspection_seconds),
        inspection_max_s=round(max(inspection_seconds, default=0.0), 3),
        inspected_p99_ms=round(inspected_p99 * 1000, 1),
        inspected_p99_ratio=round(inspected_p99 / unloaded_p99, 2),
        rss_growth_mib=round(rss_growth, 1),
    )
    assert attacked_codes == Counter({"OK": 2 * CALLERS * CALLS})
    assert baseline_codes == Counter({"OK": 2 * CALLERS * CALLS})
    assert stranger_codes == Counter({"UNAUTHENTICATED": SILENT})
    assert body_codes == Counter({"UNAUTHENTICATED": BODIES})
    assert not FORBIDDEN & {grpc.StatusCode[c] for c in attacked_codes | body_codes if c != "OK"}
    # A liveness bound, not the speed target (reported above, and measured by the bench): the
    # backtracking screen took 12.6 s on one such note; a clean run's first inspection, cold,
    # took 1.57 s once on this two-core machine while the others took 0.03-0.13 s.
    assert inspection_seconds and max(inspection_seconds) < 5.0
    assert rss_growth < RSS_BOUND_MIB
