"""Scenario 3: SIGKILL of the ledger process at random moments of a sustained load of journal
appends and admission commits, then a restart on the same port and a full verification.

Invariant after every restart: every journal verifies, no half-written transaction (tickets,
execution requests and settlement entries stay one-to-one), every acknowledged append and
admission is readable, and a same-ID retry of every unknown outcome never duplicates.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, ledger_pb2, ledger_pb2_grpc
from tests.ledger.admission_support import commit_request, enable_policy, seed
from tests.ledger.conftest import LedgerClients, run_request
from tests.reliability.processes import KillableLedger
from tests.reliability.scale import report, scale
from tests.support import row_counts, whole_journal

KILLS = scale(fast=1, full=20)
APPENDERS = 3
ADMISSIONS_PER_KILL = 4
INTENT = common_pb2.JOURNAL_ENTRY_KIND_TOOL_INTENT
SETTLEMENT = common_pb2.JOURNAL_ENTRY_KIND_MIGRATION_SETTLEMENT


@dataclass
class Load:
    """What the load acknowledged, and the requests whose outcome the kill left unknown."""

    appended: dict[str, list[str]] = field(default_factory=dict)
    unknown_appends: list[ledger_pb2.AppendJournalEntryRequest] = field(default_factory=list)
    admitted: dict[str, bytes] = field(default_factory=dict)
    unknown_admissions: list[ledger_pb2.CommitAdmissionRequest] = field(default_factory=list)
    retries: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, key: str) -> None:
        self.retries[key] = self.retries.get(key, 0) + 1


@pytest.fixture
def ledger_process(database_url: str, tmp_path: Path) -> Iterator[KillableLedger]:
    process = KillableLedger(database_url, tmp_path)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def _append_until_cut(
    clients: LedgerClients, run_id: str, load: Load, stop: threading.Event
) -> None:
    writer = clients.ledger()
    while not stop.is_set():
        try:
            head = writer.GetRun(ledger_pb2.GetRunRequest(run_id=run_id), timeout=10).head
        except grpc.RpcError:
            return
        call_id = f"{run_id}-call-{len(load.appended[run_id])}"
        request = ledger_pb2.AppendJournalEntryRequest(
            run_id=run_id,
            expected_head_hash=head.hash,
            kind=INTENT,
            payload_json=json.dumps({"call_id": call_id}),
        )
        try:
            writer.AppendJournalEntry(request, timeout=10)
        except grpc.RpcError:
            with load.lock:
                load.unknown_appends.append(request)
            return
        load.appended[run_id].append(call_id)


def _admit_until_cut(
    clients: LedgerClients, requests: list[ledger_pb2.CommitAdmissionRequest], load: Load
) -> None:
    service = ledger_pb2_grpc.LedgerServiceStub(clients.channel("service-token"))
    for request in requests:
        try:
            load.admitted[request.run_id] = service.CommitAdmission(
                request, timeout=10
            ).ticket.SerializeToString()
        except grpc.RpcError:
            load.unknown_admissions.append(request)
            return


def _settle(clients: LedgerClients, load: Load) -> None:
    """Retry every unknown outcome with the same ID (expected head / request_id)."""
    writer = clients.ledger()
    for request in load.unknown_appends:
        call_id = json.loads(request.payload_json)["call_id"]
        try:
            writer.AppendJournalEntry(request, timeout=30)
            load.count("append_retry_appended")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.ABORTED, error  # type: ignore[attr-defined]
            load.count("append_retry_found_committed")
        load.appended[request.run_id].append(call_id)
    load.unknown_appends.clear()
    service = ledger_pb2_grpc.LedgerServiceStub(clients.channel("service-token"))
    for admission in load.unknown_admissions:
        response = service.CommitAdmission(admission, timeout=30)
        load.count("admission_retry_" + ("created" if response.created else "replayed"))
        load.admitted[admission.run_id] = response.ticket.SerializeToString()
    load.unknown_admissions.clear()


def _verify(clients: LedgerClients, engine: Engine, load: Load, runs: list[str]) -> None:
    reader = clients.ledger("reader-token")
    for run_id in runs:
        assert reader.VerifyJournal(ledger_pb2.VerifyJournalRequest(run_id=run_id)).valid, run_id
        entries = whole_journal(reader, run_id)
        calls = [json.loads(e.payload_json)["call_id"] for e in entries if e.kind == INTENT]
        if run_id in load.appended:
            assert calls == load.appended[run_id], run_id  # none lost, none duplicated
        assert sum(e.kind == SETTLEMENT for e in entries) == (run_id in load.admitted), run_id
    for run_id, ticket in load.admitted.items():
        request_id = "req-" + run_id
        read_back = reader.GetAdmission(
            ledger_pb2.GetAdmissionRequest(run_id=run_id, request_id=request_id)
        ).ticket
        assert read_back.SerializeToString() == ticket, run_id
    counts = row_counts(engine)
    assert counts["admission_tickets"] == counts["execution_requests"] == len(load.admitted)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_sigkill_under_load_loses_nothing_acknowledged(
    ledger_process: KillableLedger, engine: Engine
) -> None:
    clients = ledger_process.clients()
    rng = random.Random(20261203)
    append_runs = [f"append-{n}" for n in range(APPENDERS)]
    for run_id in append_runs:
        clients.ledger().CreateRun(run_request(run_id))
    admission_runs = [f"adm-{n}" for n in range(KILLS * ADMISSIONS_PER_KILL)]
    enable_policy(clients, pending_ticket_limit=len(admission_runs) + 1)
    pending = [
        commit_request(clients, seed(clients, run_id=run_id), "req-" + run_id)
        for run_id in admission_runs
    ]
    load = Load(appended={run_id: [] for run_id in append_runs})
    all_runs = append_runs + admission_runs
    started = time.monotonic()
    for kill in range(KILLS):
        stop = threading.Event()
        batch = pending[kill * ADMISSIONS_PER_KILL : (kill + 1) * ADMISSIONS_PER_KILL]
        threads = [
            threading.Thread(target=_append_until_cut, args=(clients, run_id, load, stop))
            for run_id in append_runs
        ]
        threads.append(threading.Thread(target=_admit_until_cut, args=(clients, batch, load)))
        for thread in threads:
            thread.start()
        time.sleep(rng.uniform(0.05, 1.0))
        ledger_process.kill()
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        ledger_process.start()
        _settle(clients, load)
        # Admissions the kill came before are simply submitted now.
        _admit_until_cut(clients, [r for r in batch if r.run_id not in load.admitted], load)
        _verify(clients, engine, load, all_runs)
    report(
        "ledger_sigkill",
        kills=KILLS,
        restarts=ledger_process.starts - 1,
        appends_acknowledged=sum(len(calls) for calls in load.appended.values()),
        admissions=len(load.admitted),
        settled_by_retry=load.retries or 0,
        duplicates=0,
        lost=0,
        seconds=round(time.monotonic() - started, 1),
    )
