"""Scenario: two ledger replicas with signing on share one PostgreSQL database; writers append to
the same runs through either, a monitor follows the head feed, and one replica is SIGKILLed
mid-append, again and again (issue 43, ADR 0015).

Invariant: no append is refused for an unsigned head (a killed transaction leaves no head without
its signature), the monitor raises no alarm, and every run's exported bundle verifies offline
with the pinned keys and extends every head the monitor witnessed.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from forge.continuity.v1 import common_pb2, ledger_pb2
from forge_audit.verify import load_trusted_keys, verify_file
from services.client import ContinuityClient
from services.client.heads import HeadsFile
from services.ledger.domain.signing import write_new_key
from shared.runtime.errors import DomainError
from tests.ledger.conftest import LedgerClients, run_request
from tests.reliability.processes import KillableLedger
from tests.reliability.scale import report, scale

KILLS = scale(fast=1, full=10)
RUNS = 3
WRITERS_PER_RUN = 2  # two writers of one run race through either replica
INTENT = common_pb2.JOURNAL_ENTRY_KIND_TOOL_INTENT


@pytest.fixture
def replicas(database_url: str, tmp_path: Path) -> Iterator[list[KillableLedger]]:
    write_new_key(tmp_path / "signing-key.pem")
    env = {"FORGE_SIGNING_KEY_FILE": str(tmp_path / "signing-key.pem")}
    pair = [
        KillableLedger(database_url, tmp_path, label=f"ledger-{name}", env=env)
        for name in ("a", "b")
    ]
    for replica in pair:
        replica.start()
    try:
        yield pair
    finally:
        for replica in pair:
            replica.stop()


def reader(replica: KillableLedger) -> ContinuityClient:
    return ContinuityClient(
        "reader-token",
        ledger_target=replica.target,
        candidate_target="127.0.0.1:1",
        admission_target="127.0.0.1:1",
    )


class Writers:
    """Appenders spread over both replicas; what they saw, refusals by reason."""

    def __init__(self, replicas: list[KillableLedger], seed: int) -> None:
        self.clients = [LedgerClients(replica.served()) for replica in replicas]
        self.rng = random.Random(seed)
        self.appended = 0
        self.refusals: dict[str, int] = {}
        self.lock = threading.Lock()

    def append_until(self, run_id: str, stop: threading.Event) -> None:
        while not stop.is_set():
            writer = self.rng.choice(self.clients).ledger()
            try:
                head = writer.GetRun(ledger_pb2.GetRunRequest(run_id=run_id), timeout=5).head
                writer.AppendJournalEntry(
                    ledger_pb2.AppendJournalEntryRequest(
                        run_id=run_id,
                        expected_head_hash=head.hash,
                        kind=INTENT,
                        payload_json=json.dumps({"call_id": f"{run_id}-{time.monotonic_ns()}"}),
                    ),
                    timeout=5,
                )
                with self.lock:
                    self.appended += 1
            except grpc.RpcError as error:
                with self.lock:
                    code = error.code().name  # type: ignore[attr-defined]
                    self.refusals[code] = self.refusals.get(code, 0) + 1
                    details = error.details() or ""  # type: ignore[attr-defined]
                    assert "not the head this ledger signed" not in details, details
                time.sleep(0.01)


def watch(replicas: list[KillableLedger], heads: HeadsFile, stop: threading.Event) -> list[str]:
    """The monitor: one pass over the feed every 0.1 s through whichever replica answers."""
    alarms: list[str] = []
    cursor = ""
    while not stop.is_set():
        for replica in replicas:
            try:
                with reader(replica) as client:
                    passed = client.watch_heads_once(heads, cursor)
                cursor = passed.cursor
                alarms += [alarm.line() for alarm in passed.alarms]
                break
            except (grpc.RpcError, DomainError):
                continue  # a killed replica: ask the other one
        time.sleep(0.1)
    return alarms


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_replica_killed_mid_append_with_signing_on_leaves_bundles_that_verify(
    replicas: list[KillableLedger], tmp_path: Path
) -> None:
    rng = random.Random(20261206)
    runs = [f"signed-{n}" for n in range(RUNS)]
    first = LedgerClients(replicas[0].served())
    for run_id in runs:
        first.ledger().CreateRun(run_request(run_id))
    writers = Writers(replicas, seed=7)
    heads = HeadsFile(tmp_path / "heads.jsonl")
    monitor_alarms: list[str] = []
    started = time.monotonic()
    for _ in range(KILLS):
        stop = threading.Event()
        threads = [
            threading.Thread(target=writers.append_until, args=(run_id, stop))
            for run_id in runs
            for _ in range(WRITERS_PER_RUN)
        ]
        monitor = threading.Thread(
            target=lambda stop=stop: monitor_alarms.extend(watch(replicas, heads, stop))
        )
        for thread in [*threads, monitor]:
            thread.start()
        time.sleep(rng.uniform(0.3, 1.5))
        victim = rng.choice(replicas)
        victim.kill()
        time.sleep(rng.uniform(0.2, 0.6))  # the other replica keeps appending
        victim.start()
        time.sleep(0.3)
        stop.set()
        for thread in [*threads, monitor]:
            thread.join(timeout=60)
    assert monitor_alarms == []
    assert writers.appended > 0
    # the monitor's last pass, then every bundle against the pinned keys and witnessed heads
    with reader(replicas[1]) as client:
        assert client.watch_heads_once(heads).alarms == []
        keys = tmp_path / "signing-keys.json"
        keys.write_text(json.dumps(client.signing_keys_document()))
        verified = 0
        for run_id in runs:
            bundle = client.export_journal(run_id, tmp_path / f"{run_id}.jsonl").path
            result = verify_file(Path(bundle), load_trusted_keys(keys), known_heads=heads.path)
            assert result.witnessed_heads > 0 and result.signed_heads == result.entries
            verified += 1
    report(
        "signed_heads_replica_sigkill",
        kills=KILLS,
        appends_acknowledged=writers.appended,
        refusals=writers.refusals,
        heads_witnessed=sum(1 for _ in heads.path.open("rb")),
        bundles_verified=verified,
        alarms=0,
        seconds=round(time.monotonic() - started, 1),
    )
