"""The admission commit and the worker path cost a fixed number of statements per write,
whatever the length of the run they continue (docs/performance-history.md, round 4): the admission's
commit (its expiry sweep included), a claim, a worker's own record, a command charge and the
completion each run the same statements on a run with a long history before its hold as on a
short one, and no more than the counts below. Counted with SQLAlchemy's
``before_cursor_execute`` on the ledger's own engine; a change that adds a statement to one of
these paths fails here and says which."""

from __future__ import annotations

import json

from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, execution_pb2, ledger_pb2
from services.demo.seed import SeededRun, seed_held_run
from services.ledger.domain.journal import EntryKind, seal
from services.ledger.repository.journal import insert_journal_entries
from services.ledger.repository.journal_reads import journal_head
from shared.continuity.canonical import canonical_text, digest_of
from shared.continuity.timeutil import to_text, utc_now
from tests.ledger.admission_support import (
    DERIVED,
    FIXTURE,
    claim_request,
    commit,
    commit_request,
    enable_policy,
    execution,
    reconstructed,
)
from tests.ledger.conftest import LedgerClients, annotate, counted, run_request

# The most statements each write may run (the transaction's own BEGIN/COMMIT are not counted).
# A claim reads the run's run_started and a command charge its command ledger with the entries
# the unknown-effects rule judges (transactions/execution_rules.py:read_effects). An admission
# takes its place under the pending cap with one statement more (ADR 0049; on PostgreSQL it is
# part of the statement that writes the rows). A completion certifies from entries read in that
# same statement (it read the journal since the ownership claim once more before).
MOST: dict[str, int] = {"admit": 11, "claim": 8, "append": 7, "record": 7, "complete": 8}
# PostgreSQL writes an admission's rows in one statement (repository/admissions.py), and a
# journal writer's change of its request, its note on the run row and its entry in one
# (repository/journal.py).
MOST_ON_POSTGRESQL: dict[str, int] = {
    "admit": 4,
    "claim": 5,
    "append": 5,
    "record": 5,
    "complete": 5,
}
PADDING = 2_000


def _pad(engine: Engine, run_id: str, padding: int) -> str:
    """``padding`` more entries sealed in bulk after the run's head (a long history, as a
    long-running attempt's records would be); the new head."""
    with engine.begin() as connection:
        sequence, head = journal_head(connection, run_id)
        batch = []
        for n in range(padding):
            entry = seal(
                run_id,
                sequence + 1,
                EntryKind.STARTUP_RECOVERY_ANNOTATION,
                canonical_text({"annotation": f"history {n}"}),
                head,
                "platform",
                to_text(utc_now()),
            )
            batch.append(entry)
            sequence, head = entry.sequence, entry.hash
        insert_journal_entries(connection, batch)
    return head


def _held_run(clients: LedgerClients, engine: Engine, run_id: str, padding: int) -> SeededRun:
    """A held run whose history before the hold has ``padding`` more entries (sealed in bulk
    after ``run_started``, as a long-running attempt's records would be)."""
    rest: list[tuple[int, dict[str, object]]] = []

    def keep_the_start(
        rows: list[tuple[int, dict[str, object]]],
    ) -> list[tuple[int, dict[str, object]]]:
        rest.extend(rows[1:])
        return rows[:1]

    seeded = seed_held_run(clients.ledger(), FIXTURE, run_id, edit=keep_the_start)  # type: ignore[arg-type]
    head = _pad(engine, run_id, padding)
    for kind, fields in rest:
        head = (
            clients.ledger()
            .AppendJournalEntry(
                ledger_pb2.AppendJournalEntryRequest(
                    run_id=run_id,
                    expected_head_hash=head,
                    kind=kind,  # type: ignore[arg-type]
                    payload_json=json.dumps(fields),
                )
            )
            .entry.hash
        )
    seeded.head_hash = head
    derived = reconstructed(1).derived_checkpoint  # the commit re-checks the stored bytes
    clients.ledger("service-token").PutBlob(ledger_pb2.PutBlobRequest(content=derived))
    return seeded


def _statements_per_write(
    clients: LedgerClients, engine: Engine, run_id: str, padding: int
) -> dict[str, list[str]]:
    seeded = _held_run(clients, engine, run_id, padding)
    # as the admission service sends it: with the candidate's derived checkpoint bytes
    admission = commit_request(
        clients, seeded, request_id=f"req-{run_id}", derived_checkpoint=DERIVED
    )
    found: dict[str, list[str]] = {}
    with counted(engine) as found["admit"]:
        ticket = commit(clients, admission).ticket
    exr = ticket.execution_request.execution_request_id
    worker = execution(clients)
    claim = claim_request(clients, exr)
    with counted(engine) as found["claim"]:
        answer = worker.ClaimExecutionRequest(claim)
    head = answer.worker_claimed_entry.hash
    with counted(engine) as found["append"]:
        head = (
            clients.ledger("worker-token")
            .AppendJournalEntry(
                ledger_pb2.AppendJournalEntryRequest(
                    run_id=run_id,
                    expected_head_hash=head,
                    kind=common_pb2.JOURNAL_ENTRY_KIND_TOOL_INTENT,
                    payload_json=json.dumps(
                        {"call_id": "c1", "execution_request_id": exr, "lease_generation": 1}
                    ),
                )
            )
            .entry.hash
        )
    with counted(engine) as found["record"]:
        worker.RecordCommand(
            execution_pb2.RecordCommandRequest(
                execution_request_id=exr,
                lease_generation=1,
                command_id="c1",
                command_digest=digest_of("c1"),
            )
        )
    with counted(engine) as found["complete"]:
        worker.CompleteExecutionRequest(
            execution_pb2.CompleteExecutionRequestRequest(
                execution_request_id=exr, lease_generation=1
            )
        )
    return found


def test_each_worker_write_runs_a_fixed_number_of_statements_whatever_the_run_length(
    clients: LedgerClients, engine: Engine
) -> None:
    enable_policy(clients, pending_ticket_limit=10)
    short = _statements_per_write(clients, engine, "run-short", 0)
    long = _statements_per_write(clients, engine, "run-long", PADDING)
    for write, statements in short.items():
        assert len(long[write]) == len(statements), (write, long[write], statements)
        most = MOST_ON_POSTGRESQL if engine.dialect.name == "postgresql" else MOST
        assert len(statements) <= most[write], (write, statements)


def test_a_native_append_is_one_statement_for_the_run_row_and_one_insert(
    clients: LedgerClients, engine: Engine, database_url: str
) -> None:
    """The run row noted, locked and read with its head in one UPDATE … RETURNING, then the
    insert (SQLite's BEGIN IMMEDIATE aside); the same on a run with a long history. On
    PostgreSQL, an append at the head this ledger appended last notes and inserts in one
    statement (transactions.known_heads), on any history."""

    def statements_of(run_id: str, head: str, note: str) -> tuple[str, list[str]]:
        with counted(engine) as statements:
            head = annotate(clients, run_id, head, note)
        return head, [s.split()[0] for s in statements if not s.startswith("BEGIN")]

    clients.ledger().CreateRun(run_request("run-plain"))
    head, first = statements_of("run-plain", "", "start")  # nothing known of the run yet
    _, known = statements_of("run-plain", head, "next")
    clients.ledger().CreateRun(run_request("run-padded"))
    annotate(clients, "run-padded", "", "start")
    # a long history this ledger did not append: the head it knows is not the run's head
    head, after_padding = statements_of("run-padded", _pad(engine, "run-padded", PADDING), "next")
    _, known_padded = statements_of("run-padded", head, "again")
    assert first == after_padding == ["UPDATE", "INSERT"]
    one = ["WITH"] if database_url.startswith("postgresql") else ["UPDATE", "INSERT"]
    assert known == known_padded == one
