"""Two ledger replicas on one PostgreSQL schema, one with its wall clock an hour ahead (at full
scale also 20 minutes behind; libfaketime): leases, expiry and claim decisions and
``recorded_at`` are the same whichever replica answers, because both measure them on the
database's clock (ADR 0057).

Invariants: a lease granted by either replica expires the database's time of the commit plus the
lease; both replicas read every request in the same state with the same expiry; each request is
claimed through the replica that did not admit it, and neither claim is refused as expired (on
the skewed host's own clock an hour ahead, the other's 900 s lease is long past; 20 minutes
behind, the leases it grants are), nor does either replica's scheduled sweep expire a request;
every entry either replica journals is stamped within seconds of the database's clock, in
journal order.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import grpc
import pytest
from sqlalchemy import Engine, text

from forge.continuity.v1 import common_pb2, execution_pb2, ledger_pb2
from shared.continuity.timeutil import from_timestamp
from tests.ledger.admission_support import (
    claim_request,
    commit,
    commit_request,
    enable_policy,
    execution,
    seed,
)
from tests.ledger.conftest import LedgerClients, run_request
from tests.reliability.faketime import FAKETIME_AVAILABLE, faketime_environment
from tests.reliability.processes import KillableLedger
from tests.reliability.scale import FULL, report
from tests.support import whole_journal

#: libfaketime's offset, and the seconds it puts the skewed host's clock from the database's.
SKEWS = [("+1h", 3600)] + ([("-20m", -1200)] if FULL else [])
#: How far a stamp may sit from the database's clock read around it: the replicas' error
#: bounds are well under a millisecond on one host; this leaves room for a slow machine only.
TOLERANCE = timedelta(seconds=2)
#: Both replicas sweep expired leases this often, so a sweep on a skewed clock would show.
SWEEP_SECONDS = "0.5"
QUEUED = common_pb2.EXECUTION_REQUEST_STATE_QUEUED


@pytest.fixture
def replicas(
    database_url: str, skew: str, tmp_path: Path
) -> Iterator[tuple[KillableLedger, KillableLedger]]:
    if not FAKETIME_AVAILABLE:
        if os.environ.get("CI") == "true":
            pytest.fail("libfaketime is not installed: make faketime")
        pytest.skip("libfaketime is not installed (make faketime)")
    sweep = {"FORGE_EXPIRY_SWEEP_SECONDS": SWEEP_SECONDS}
    host = KillableLedger(database_url, tmp_path, label="ledger-host", env=sweep)
    skewed = KillableLedger(
        database_url, tmp_path, label="ledger-skewed", env={**sweep, **faketime_environment(skew)}
    )
    for replica in (host, skewed):
        replica.launch()
    try:
        for replica in (host, skewed):
            replica.wait_serving()
        yield host, skewed
    finally:
        for replica in (host, skewed):
            replica.stop()


def host_offset(replica: KillableLedger) -> float:
    """How far the replica found its host's clock from the database's, from its start-up log."""
    found = re.search(r"this host's clock is ([+-][0-9.]+) s off it", replica.log())
    assert found, replica.log()
    return float(found[1])


def database_now(engine: Engine) -> datetime:
    with engine.connect() as connection:
        value: datetime = connection.execute(text("SELECT clock_timestamp()")).scalar_one()
    return value


def admit(
    engine: Engine, through: LedgerClients, seeded_by: LedgerClients, run_id: str
) -> tuple[ledger_pb2.AdmissionTicket, datetime, datetime]:
    """Seed ``run_id`` and admit it through ``through``; the database's time around the commit."""
    seeded = seed(seeded_by, run_id=run_id)
    before = database_now(engine)
    ticket = commit(through, commit_request(through, seeded, f"req-{run_id}")).ticket
    return ticket, before, database_now(engine)


def append_alternating(replicas: list[LedgerClients], run_id: str, count: int) -> None:
    """``count`` native entries on one run, each through the other replica than the last."""
    replicas[0].ledger().CreateRun(run_request(run_id))
    for number in range(count):
        writer = replicas[number % 2].ledger()
        head = writer.GetRun(ledger_pb2.GetRunRequest(run_id=run_id)).head
        writer.AppendJournalEntry(
            ledger_pb2.AppendJournalEntryRequest(
                run_id=run_id,
                expected_head_hash=head.hash,
                kind=common_pb2.JOURNAL_ENTRY_KIND_TOOL_INTENT,
                payload_json=json.dumps({"call_id": f"call-{number}"}),
            )
        )


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
@pytest.mark.parametrize(("skew", "offset"), SKEWS)
def test_a_replica_with_a_skewed_clock_decides_leases_on_the_databases_clock(
    replicas: tuple[KillableLedger, KillableLedger], engine: Engine, skew: str, offset: int
) -> None:
    # The skew is real: the skewed replica's wall clock is that far from the database's.
    assert abs(host_offset(replicas[0])) < 1
    assert abs(host_offset(replicas[1]) - offset) < 5
    host, skewed = (replica.clients() for replica in replicas)
    started = database_now(engine)
    enable_policy(host)

    # A lease granted by either replica ends at the database's commit time plus the lease.
    admitted = {
        "host": admit(engine, host, host, "run-host"),
        "skewed": admit(engine, skewed, host, "run-skewed"),
    }
    for by, (ticket, before, after) in admitted.items():
        lease = ticket.execution_request.lease
        granted = timedelta(seconds=lease.seconds)
        expires = from_timestamp(lease.expires_at)
        assert before + granted - TOLERANCE <= expires <= after + granted + TOLERANCE, (by, expires)

    # Both replicas read each request alike, after several scheduled sweeps of each.
    time.sleep(4 * float(SWEEP_SECONDS))
    for by, (ticket, _, _) in admitted.items():
        exr = ticket.execution_request.execution_request_id
        read = [
            execution(clients, "reader-token")
            .GetExecutionRequest(execution_pb2.GetExecutionRequestRequest(execution_request_id=exr))
            .execution_request
            for clients in (host, skewed)
        ]
        assert [r.state for r in read] == [QUEUED, QUEUED], (by, read)
        assert read[0].lease == read[1].lease == ticket.execution_request.lease

    # Each request is claimed through the replica that did not admit it: neither is expired.
    claims = {"host": skewed, "skewed": host}
    for by, (ticket, _, _) in admitted.items():
        exr = ticket.execution_request.execution_request_id
        through = claims[by]
        try:
            claimed = execution(through).ClaimExecutionRequest(claim_request(through, exr))
        except grpc.RpcError as refused:
            pytest.fail(f"the claim of the request admitted by {by} was refused: {refused}")
        assert claimed.execution_request.lease.generation == 1

    # Every entry either replica wrote is stamped on the database's clock, in journal order.
    append_alternating([host, skewed], "run-alternating", 6)
    ended = database_now(engine)
    stamps = 0
    for run_id in ("run-host", "run-skewed", "run-alternating"):
        recorded = [
            from_timestamp(entry.recorded_at)
            for entry in whole_journal(host.ledger("reader-token"), run_id)
        ]
        assert recorded == sorted(recorded), run_id
        assert all(started - TOLERANCE <= at <= ended + TOLERANCE for at in recorded), run_id
        stamps += len(recorded)
    report("skewed_clock", skew=skew, replicas=2, stamps_checked=stamps, claims=len(claims))
