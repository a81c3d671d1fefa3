"""Scenario 4: the ledger's PostgreSQL connection cut by a TCP proxy just before and just after
the COMMIT of a write (journal appends and admission commits), through the real ledger server.

Invariant: every unknown outcome is settled by a read-back and a same-ID retry (the expected
head for an append, the request_id for an admission); 0 duplicates, 0 acknowledged writes lost,
and every journal verifies. The cut is reported as UNAVAILABLE DATABASE_UNAVAILABLE (retry by
the same ID), never INTERNAL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import grpc
import pytest

from forge.continuity.v1 import common_pb2, ledger_pb2, ledger_pb2_grpc
from services.ledger.database import make_engine
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from shared.runtime.errors import from_rpc_error
from tests.ledger.admission_support import commit_request, enable_policy, seed
from tests.ledger.conftest import LedgerClients, run_request
from tests.reliability.proxy import CuttingProxy, Mode
from tests.reliability.scale import report, scale
from tests.support import serve, token_roles, whole_journal

TRIALS = scale(fast=6, full=200)
MODES: tuple[Mode, ...] = ("before_commit", "after_commit")
INTENT = common_pb2.JOURNAL_ENTRY_KIND_TOOL_INTENT
SETTLEMENT = common_pb2.JOURNAL_ENTRY_KIND_MIGRATION_SETTLEMENT


@pytest.fixture
def cut_ledger(database_url: str) -> Iterator[tuple[LedgerClients, CuttingProxy]]:
    proxy = CuttingProxy()
    parts = urlsplit(database_url)
    through_proxy = urlunsplit(parts._replace(netloc=f"postgres@127.0.0.1:{proxy.port}"))
    engine = make_engine(through_proxy)
    try:
        with serve("ledger", bindings(Ledger(engine, authority=token_roles))) as served:
            yield LedgerClients(served), proxy
    finally:
        engine.dispose()
        proxy.close()


def _failure(error: grpc.RpcError) -> str:
    return f"{error.code().name}:{from_rpc_error(error).reason}"  # type: ignore[attr-defined]


CUT_REPORTED_AS = "UNAVAILABLE:DATABASE_UNAVAILABLE"


def _tally(tally: dict[str, int], key: str) -> None:
    tally[key] = tally.get(key, 0) + 1


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_appends_survive_a_cut_before_and_after_commit(
    cut_ledger: tuple[LedgerClients, CuttingProxy],
) -> None:
    clients, proxy = cut_ledger
    writer = clients.ledger()
    writer.CreateRun(run_request("run-cut"))
    acknowledged: list[str] = []
    settled: dict[str, int] = {}
    for trial in range(TRIALS * len(MODES)):
        mode = MODES[trial % len(MODES)]
        head = writer.GetRun(ledger_pb2.GetRunRequest(run_id="run-cut")).head
        request = ledger_pb2.AppendJournalEntryRequest(
            run_id="run-cut",
            expected_head_hash=head.hash,
            kind=INTENT,
            payload_json=json.dumps({"call_id": f"call-{trial}"}),
        )
        proxy.arm(mode)
        try:
            writer.AppendJournalEntry(request, timeout=30)
            acknowledged.append(f"call-{trial}")
            _tally(settled, f"{mode}:not_cut")
            continue
        except grpc.RpcError as error:
            _tally(settled, f"{mode}:{_failure(error)}")
            assert _failure(error) == CUT_REPORTED_AS, _failure(error)
        finally:
            proxy.arm(None)
        # The outcome is unknown: a same-head retry either appends it or reports the moved head.
        try:
            writer.AppendJournalEntry(request, timeout=30)
            _tally(settled, f"{mode}:retry_appended")
        except grpc.RpcError as error:
            assert _failure(error) == "ABORTED:JOURNAL_HEAD_STALE", _failure(error)
            _tally(settled, f"{mode}:retry_found_committed")
        acknowledged.append(f"call-{trial}")
    entries = whole_journal(writer, "run-cut")
    calls = [json.loads(e.payload_json)["call_id"] for e in entries if e.kind == INTENT]
    verified = writer.VerifyJournal(ledger_pb2.VerifyJournalRequest(run_id="run-cut"))
    report(
        "database_cuts_appends",
        trials=TRIALS * len(MODES),
        cuts=dict(proxy.cuts),
        outcomes=settled,
        entries=len(calls),
        duplicates=len(calls) - len(set(calls)),
        lost=len(set(acknowledged) - set(calls)),
        chain_ok=verified.valid,
    )
    assert calls == acknowledged  # in order, none lost, none duplicated
    assert verified.valid


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_admission_commits_survive_a_cut_before_and_after_commit(
    cut_ledger: tuple[LedgerClients, CuttingProxy],
) -> None:
    clients, proxy = cut_ledger
    enable_policy(clients, pending_ticket_limit=TRIALS * len(MODES) + 1)
    service = ledger_pb2_grpc.LedgerServiceStub(clients.channel("service-token"))
    reader = clients.ledger("reader-token")
    settled: dict[str, int] = {}
    tickets: dict[str, bytes] = {}
    for trial in range(TRIALS * len(MODES)):
        mode = MODES[trial % len(MODES)]
        seeded = seed(clients, run_id=f"run-{trial}")
        request = commit_request(clients, seeded, f"req-{trial}")
        proxy.arm(mode)
        try:
            first = service.CommitAdmission(request, timeout=30)
            tickets[seeded.run_id] = first.ticket.SerializeToString()
            _tally(settled, f"{mode}:not_cut")
            continue
        except grpc.RpcError as error:
            _tally(settled, f"{mode}:{_failure(error)}")
            assert _failure(error) == CUT_REPORTED_AS, _failure(error)
        finally:
            proxy.arm(None)
        retried = service.CommitAdmission(request, timeout=30)
        _tally(settled, f"{mode}:retry_{'created' if retried.created else 'replayed'}")
        tickets[seeded.run_id] = retried.ticket.SerializeToString()
    duplicates = lost = 0
    for run_id, ticket in tickets.items():
        request_id = "req-" + run_id.removeprefix("run-")
        read_back = reader.GetAdmission(
            ledger_pb2.GetAdmissionRequest(run_id=run_id, request_id=request_id)
        ).ticket
        lost += read_back.SerializeToString() != ticket
        entries = whole_journal(reader, run_id)
        settlements = sum(e.kind == SETTLEMENT for e in entries)
        duplicates += settlements != 1
        assert reader.VerifyJournal(ledger_pb2.VerifyJournalRequest(run_id=run_id)).valid
    report(
        "database_cuts_admissions",
        trials=TRIALS * len(MODES),
        cuts=dict(proxy.cuts),
        outcomes=settled,
        tickets=len(tickets),
        duplicates=duplicates,
        lost=lost,
    )
    assert (duplicates, lost) == (0, 0)
    assert settled.get("before_commit:retry_replayed", 0) == 0
    assert settled.get("after_commit:retry_created", 0) == 0


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_idle_connections_cut_are_replaced_silently(
    cut_ledger: tuple[LedgerClients, CuttingProxy],
) -> None:
    """The pool's checkout check finds the dead connections and reconnects: no error reaches a
    caller."""
    clients, proxy = cut_ledger
    writer = clients.ledger()
    writer.CreateRun(run_request("run-idle"))
    for _ in range(3):
        proxy.cut_all()
        assert writer.GetRun(ledger_pb2.GetRunRequest(run_id="run-idle"), timeout=30).run
