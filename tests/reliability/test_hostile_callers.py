"""Scenario 10: hostile callers on the wire (ADR 0040, ADR 0041).

Eight legitimate callers read a run (`GetRun`) while, at the same time, strangers open calls with
no token and never send their body, strangers send 30 MiB bodies with no token, and a reader
inspects a run whose payloads are the screening rules' worst case (64 KiB of ``a-a-…`` in every
entry). Invariant: every legitimate call succeeds, every stranger is refused UNAUTHENTICATED,
each inspection finishes within 1 s, 0 UNKNOWN/INTERNAL, the process's RSS stays bounded. The
legitimate callers' p99 with and without the attack is reported (the issue's bound: within 2×).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections import Counter
from pathlib import Path

import grpc

from forge.continuity.v1 import inspection_pb2, ledger_pb2
from services.demo.seed import load_fixture, seed_held_run
from tests.ledger.conftest import LedgerClients
from tests.ledger.test_hostile_callers import silent_calls
from tests.reliability.scale import report, scale

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


def _p99(latencies: list[float]) -> float:
    return statistics.quantiles(latencies, n=100)[98] if len(latencies) > 1 else latencies[0]


def _legitimate_round(clients: LedgerClients, codes: Counter[str]) -> list[float]:
    latencies: list[float] = []
    lock = threading.Lock()

    def caller(n: int) -> None:
        ledger = clients.ledger("reader-token")
        for _ in range(CALLS):
            started = time.perf_counter()
            try:
                ledger.GetRun(ledger_pb2.GetRunRequest(run_id="run-1"), timeout=10)
                code = "OK"
            except grpc.RpcError as error:
                code = error.code().name  # type: ignore[attr-defined]
            with lock:
                latencies.append(time.perf_counter() - started)
                codes[code] += 1

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(CALLERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies


def _large_bodies(target: str, codes: Counter[str], done: threading.Event) -> None:
    channel = grpc.insecure_channel(target)
    put_blob = channel.unary_unary(
        "/forge.continuity.v1.LedgerService/PutBlob",
        request_serializer=lambda body: body,
        response_deserializer=ledger_pb2.PutBlobResponse.FromString,
    )
    # One PutBlobRequest of 30 MiB, serialized once: field 1 (bytes), its length as a varint.
    content = b"x" * BODY_BYTES
    length, varint = len(content), bytearray()
    while length > 0x7F:
        varint.append((length & 0x7F) | 0x80)
        length >>= 7
    varint.append(length)
    body = b"\x0a" + bytes(varint) + content
    for _ in range(BODIES):
        try:
            put_blob(body, timeout=30)
            codes["OK"] += 1
        except grpc.RpcError as error:
            codes[error.code().name] += 1  # type: ignore[attr-defined]
    channel.close()
    done.set()


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
    inspection_seconds: list[float] = []
    bodies_done, stop = threading.Event(), threading.Event()
    with silent_calls(clients.served.target, SILENT, token=None) as strangers:
        attackers = [
            threading.Thread(
                target=_large_bodies, args=(clients.served.target, body_codes, bodies_done)
            ),
            threading.Thread(target=_inspections, args=(clients, inspection_seconds, stop)),
        ]
        for attacker in attackers:
            attacker.start()
        attacked = _legitimate_round(clients, attacked_codes)
        bodies_done.wait(120)
        stop.set()
        for attacker in attackers:
            attacker.join(60)
        for stranger in strangers:
            try:
                stranger.result(timeout=10)
                stranger_codes["OK"] += 1
            except grpc.RpcError as error:
                stranger_codes[error.code().name] += 1  # type: ignore[attr-defined]
    rss_growth = _rss_mib() - rss_before

    unloaded_p99, attacked_p99 = _p99(unloaded), _p99(attacked)
    report(
        "hostile_callers",
        legitimate_calls=len(attacked),
        silent_strangers=SILENT,
        large_bodies=BODIES,
        body_mib=BODY_BYTES >> 20,
        stranger_codes=json.dumps(dict(stranger_codes)),
        body_codes=json.dumps(dict(body_codes)),
        legitimate_codes=json.dumps(dict(attacked_codes)),
        unloaded_p99_ms=round(unloaded_p99 * 1000, 1),
        attacked_p99_ms=round(attacked_p99 * 1000, 1),
        p99_ratio=round(attacked_p99 / unloaded_p99, 2),
        inspections=len(inspection_seconds),
        inspection_max_s=round(max(inspection_seconds, default=0.0), 3),
        rss_growth_mib=round(rss_growth, 1),
    )
    assert attacked_codes == Counter({"OK": CALLERS * CALLS})
    assert baseline_codes == Counter({"OK": 2 * CALLERS * CALLS})
    assert stranger_codes == Counter({"UNAUTHENTICATED": SILENT})
    assert body_codes == Counter({"UNAUTHENTICATED": BODIES})
    assert not FORBIDDEN & {grpc.StatusCode[c] for c in attacked_codes | body_codes if c != "OK"}
    assert inspection_seconds and max(inspection_seconds) < 1.0
    assert rss_growth < RSS_BOUND_MIB
