"""The hash-chained journal through the real ledger gRPC service, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from sqlalchemy import Engine, text

from forge.continuity.v1 import common_pb2, ledger_pb2
from shared.continuity.canonical import GENESIS_HASH, parse_json
from shared.continuity.journal_chain import entry_hash
from tests.errors import expect_error
from tests.ledger.conftest import LedgerClients, run_request
from tests.support import as_database_owner, row_counts, whole_journal

K = common_pb2.JournalEntryKind


def append(
    clients: LedgerClients, run_id: str, head: str, kind: int, payload: object
) -> common_pb2.JournalEntry:
    response = clients.ledger().AppendJournalEntry(
        ledger_pb2.AppendJournalEntryRequest(
            run_id=run_id, expected_head_hash=head, kind=kind, payload_json=json.dumps(payload)
        )
    )
    return response.entry


def journal(clients: LedgerClients, run_id: str) -> list[common_pb2.JournalEntry]:
    return whole_journal(clients.ledger("reader-token"), run_id)


def test_create_run_is_idempotent_and_conflicts_on_different_content(
    ledger_server: LedgerClients,
) -> None:
    stub = ledger_server.ledger()
    first = stub.CreateRun(run_request())
    again = stub.CreateRun(run_request())
    assert first.created and not again.created
    assert again.run == first.run
    assert first.run.created_by == "paul-writer"
    expect_error(
        grpc.StatusCode.ALREADY_EXISTS,
        "RUN_CONFLICT",
        lambda: stub.CreateRun(run_request(command_limit=23)),
    )
    assert stub.GetRun(ledger_pb2.GetRunRequest(run_id="run-1")).run.command_limit == 22


@pytest.mark.parametrize(
    "deadline",
    [Timestamp(seconds=1, nanos=-1), Timestamp(seconds=2**63 - 1), Timestamp(seconds=-(2**40))],
    ids=["negative-nanos", "beyond-year-9999", "before-year-1"],
)
def test_an_invalid_active_deadline_is_field_invalid_and_writes_nothing(
    ledger_server: LedgerClients, engine: Engine, deadline: Timestamp
) -> None:
    counts = row_counts(engine)
    error = expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_INVALID",
        lambda: ledger_server.ledger().CreateRun(run_request(active_deadline=deadline)),
    )
    assert [v.field for v in error.field_violations] == ["active_deadline"]
    assert row_counts(engine) == counts


def test_entries_chain_from_genesis_and_hashes_recompute(ledger_server: LedgerClients) -> None:
    ledger_server.ledger().CreateRun(run_request())
    first = append(
        ledger_server,
        "run-1",
        "",
        K.JOURNAL_ENTRY_KIND_RUN_STARTED,
        {"task_id": "task-1", "attempt_id": "attempt-1"},
    )
    second = append(
        ledger_server,
        "run-1",
        first.hash,
        K.JOURNAL_ENTRY_KIND_TOOL_OUTCOME,
        {"status": "unknown", "call_id": "c1"},
    )
    assert (first.sequence, first.prev_hash) == (1, GENESIS_HASH)
    assert (second.sequence, second.prev_hash) == (2, first.hash)
    # Canonical payload: keys sorted, no whitespace.
    assert second.payload_json == '{"call_id":"c1","status":"unknown"}'
    assert second.actor == "paul-writer"
    recomputed = entry_hash(
        run_id="run-1",
        sequence=2,
        kind="tool_outcome",
        payload=parse_json(second.payload_json),
        prev_hash=first.hash,
        actor="paul-writer",
        recorded_at=second.recorded_at.ToDatetime().strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    )
    assert recomputed == second.hash
    verified = ledger_server.ledger("reader-token").VerifyJournal(
        ledger_pb2.VerifyJournalRequest(run_id="run-1")
    )
    assert verified.valid and verified.entries_checked == 2 and verified.head.hash == second.hash


def test_stale_head_is_aborted_with_current_head_and_writes_nothing(
    ledger_server: LedgerClients,
) -> None:
    ledger_server.ledger().CreateRun(run_request())
    first = append(
        ledger_server,
        "run-1",
        "",
        K.JOURNAL_ENTRY_KIND_RUN_STARTED,
        {"task_id": "t", "attempt_id": "a"},
    )
    error = expect_error(
        grpc.StatusCode.ABORTED,
        "JOURNAL_HEAD_STALE",
        lambda: append(ledger_server, "run-1", "", K.JOURNAL_ENTRY_KIND_RUN_HELD, {"reason": "x"}),
    )
    assert error.metadata["current_head_sequence"] == "1"
    assert error.metadata["current_head_hash"] == first.hash
    assert error.precondition_violations and error.precondition_violations[0].type == "JOURNAL_HEAD"
    assert [e.sequence for e in journal(ledger_server, "run-1")] == [1]


def test_each_run_appends_at_its_own_head_beside_longer_and_empty_journals(
    ledger_server: LedgerClients,
) -> None:
    """An append reads its run's head in the statement that notes it on the run row: never
    another run's (a longer journal beside it, an empty one), on either database."""
    note = K.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION
    heads = {}
    for run_id, entries in (("run-long", 3), ("run-short", 1), ("run-empty", 0)):
        ledger_server.ledger().CreateRun(run_request(run_id))
        head = ""
        for n in range(entries):
            head = append(ledger_server, run_id, head, note, {"annotation": f"n{n}"}).hash
        heads[run_id] = head
    held = K.JOURNAL_ENTRY_KIND_RUN_HELD
    second = append(ledger_server, "run-short", heads["run-short"], held, {"reason": "x"})
    first = append(ledger_server, "run-empty", "", note, {"annotation": "first"})
    assert (second.sequence, second.prev_hash) == (2, heads["run-short"])
    assert (first.sequence, first.prev_hash) == (1, GENESIS_HASH)
    assert [e.sequence for e in journal(ledger_server, "run-long")] == [1, 2, 3]


def test_thirty_two_concurrent_writers_on_an_empty_run_never_fork(
    ledger_server: LedgerClients,
) -> None:
    ledger_server.ledger().CreateRun(run_request())
    writers, failures, aborted = 32, [], [0]
    lock = threading.Lock()
    start = threading.Barrier(writers)

    def writer(index: int) -> None:
        stub = ledger_server.ledger()
        head = ""
        start.wait()
        for _attempt in range(500):
            try:
                stub.AppendJournalEntry(
                    ledger_pb2.AppendJournalEntryRequest(
                        run_id="run-1",
                        expected_head_hash=head,
                        kind=K.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
                        payload_json=json.dumps({"annotation": f"writer-{index}"}),
                    )
                )
                return
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.ABORTED:  # type: ignore[attr-defined]
                    with lock:
                        failures.append(error)
                    return
                with lock:
                    aborted[0] += 1
                from shared.runtime.errors import from_rpc_error

                head = from_rpc_error(error).metadata["current_head_hash"]
        with lock:
            failures.append(RuntimeError(f"writer {index} never appended"))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    entries = journal(ledger_server, "run-1")
    assert [e.sequence for e in entries] == list(range(1, writers + 1))
    assert sorted(json.loads(e.payload_json)["annotation"] for e in entries) == sorted(
        f"writer-{i}" for i in range(writers)
    )
    previous = GENESIS_HASH
    for entry in entries:
        assert entry.prev_hash == previous
        previous = entry.hash
    verified = ledger_server.ledger("reader-token").VerifyJournal(
        ledger_pb2.VerifyJournalRequest(run_id="run-1")
    )
    assert verified.valid and verified.entries_checked == writers


@pytest.mark.parametrize(
    ("column", "position"),
    [
        ("payload_json", 1),
        ("payload_json", 4),
        ("payload_json", 7),
        ("hash", 3),
        ("actor", 5),
        ("recorded_at", 2),
    ],
)
def test_a_changed_byte_is_reported_at_its_exact_sequence(
    ledger_server: LedgerClients, engine: Engine, column: str, position: int
) -> None:
    ledger_server.ledger().CreateRun(run_request())
    head = ""
    for index in range(7):
        head = append(
            ledger_server,
            "run-1",
            head,
            K.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
            {"annotation": f"n{index}"},
        ).hash
    with as_database_owner(engine) as connection:
        value = connection.execute(
            text(f"SELECT {column} FROM journal_entries WHERE run_id = 'run-1' AND sequence = :s"),
            {"s": position},
        ).scalar_one()
        # Flip one character in the middle of the stored value.
        middle = len(value) // 2
        replacement = "0" if value[middle] != "0" else "1"
        tampered = value[:middle] + replacement + value[middle + 1 :]
        connection.execute(
            text(
                f"UPDATE journal_entries SET {column} = :v WHERE run_id = 'run-1' AND sequence = :s"
            ),
            {"v": tampered, "s": position},
        )
    verified = ledger_server.ledger("reader-token").VerifyJournal(
        ledger_pb2.VerifyJournalRequest(run_id="run-1")
    )
    assert not verified.valid
    assert verified.first_broken_sequence == position
    assert verified.problem in {"hash_mismatch", "payload_not_canonical"}


@pytest.mark.parametrize("column", ["payload_json", "actor", "recorded_at"])
def test_a_byte_changed_after_a_verification_is_still_reported(
    ledger_server: LedgerClients, engine: Engine, column: str
) -> None:
    """The verification remembers intact rows by their exact fields: an altered row is a new
    key, recomputed and reported, however often the chain verified before."""
    ledger_server.ledger().CreateRun(run_request())
    head = ""
    for index in range(5):
        head = append(
            ledger_server,
            "run-1",
            head,
            K.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
            {"annotation": f"n{index}"},
        ).hash
    reader = ledger_server.ledger("reader-token")
    request = ledger_pb2.VerifyJournalRequest(run_id="run-1")
    assert reader.VerifyJournal(request).valid
    with as_database_owner(engine) as connection:
        value = connection.execute(
            text(f"SELECT {column} FROM journal_entries WHERE run_id = 'run-1' AND sequence = 3")
        ).scalar_one()
        middle = len(value) // 2
        replacement = "0" if value[middle] != "0" else "1"
        connection.execute(
            text(
                f"UPDATE journal_entries SET {column} = :v WHERE run_id = 'run-1' AND sequence = 3"
            ),
            {"v": value[:middle] + replacement + value[middle + 1 :]},
        )
    verified = reader.VerifyJournal(request)
    assert not verified.valid
    assert verified.first_broken_sequence == 3
    with as_database_owner(engine) as connection:
        connection.execute(
            text(
                f"UPDATE journal_entries SET {column} = :v WHERE run_id = 'run-1' AND sequence = 3"
            ),
            {"v": value},
        )
    assert reader.VerifyJournal(request).valid


def test_a_deleted_entry_is_reported_where_it_should_have_been(
    ledger_server: LedgerClients, engine: Engine
) -> None:
    ledger_server.ledger().CreateRun(run_request())
    head = ""
    for index in range(5):
        head = append(
            ledger_server, "run-1", head, K.JOURNAL_ENTRY_KIND_RUN_HELD, {"reason": f"r{index}"}
        ).hash
    with as_database_owner(engine) as connection:
        connection.execute(
            text("DELETE FROM journal_entries WHERE run_id = 'run-1' AND sequence = 3")
        )
    verified = ledger_server.ledger("reader-token").VerifyJournal(
        ledger_pb2.VerifyJournalRequest(run_id="run-1")
    )
    assert (verified.valid, verified.first_broken_sequence, verified.problem) == (
        False,
        3,
        "sequence_gap",
    )


# A well-formed digest, and the same with a trailing newline: "$" in a pattern matches before it.
DIGEST = "sha256:" + "a" * 64
NEWLINE_DIGEST = DIGEST + "\n"

BAD_APPENDS = [
    pytest.param(
        K.JOURNAL_ENTRY_KIND_RUN_HELD,
        "{not json",
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="malformed",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_RUN_HELD,
        "[1, 2]",
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="not-an-object",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_RUN_HELD,
        '{"reason": "a", "reason": "b"}',
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="duplicate-key",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_RUN_HELD,
        json.dumps({"reason": "x" * (256 * 1024)}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_TOO_LARGE",
        id="oversized",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_TOOL_OUTCOME,
        '{"call_id": "c1"}',
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="missing-field",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_TOOL_OUTCOME,
        '{"call_id": "c1", "status": "maybe"}',
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="bad-status",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_UNSPECIFIED,
        '{"reason": "x"}',
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_ENTRY_KIND_UNKNOWN",
        id="unspecified-kind",
    ),
    pytest.param(
        999,
        '{"reason": "x"}',
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_ENTRY_KIND_UNKNOWN",
        id="unknown-kind",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_MIGRATION_SETTLEMENT,
        '{"request_id": "r", "derived_checkpoint_digest": "d", "candidate_digest": "c"}',
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_ENTRY_KIND_RESERVED",
        id="reserved-kind",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_READONLY_OBSERVATION_RECOVERY,
        '{"recovery_id": "r", "derived_checkpoint_digest": "d"}',
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_ENTRY_KIND_RESERVED",
        id="reserved-observation-witness",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_CHECKPOINT_STORED,
        json.dumps({"checkpoint_digest": NEWLINE_DIGEST}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="blob-digest-with-newline",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_TOOL_OUTCOME,
        json.dumps(
            {"call_id": "c1", "status": "succeeded", "result": {"result_digest": NEWLINE_DIGEST}}
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="nested-blob-digest-with-newline",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_RESPONSE_CONSUMED,
        json.dumps(
            {
                "request_id": "r1",
                "response_digest": DIGEST,
                "retained_results": {"c1": NEWLINE_DIGEST},
            }
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="retained-result-with-newline",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED,
        json.dumps({"command_id": "cmd-1\n"}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="command-id-with-newline",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED,
        json.dumps({"command_id": 7}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="command-id-not-a-string",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_TOOL_INTENT,
        json.dumps({"call_id": "c1", "execution_request_id": "exr-1\n"}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="execution-request-id-with-newline",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_RUN_HELD,
        '{"reason": "x", "n": ' + "9" * 5_000 + "}",
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="integer-past-the-conversion-limit",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_RUN_HELD,
        '{"reason":"x","n":' + "9" * 5_000 + "}",
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="compact-integer-past-the-conversion-limit",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_RUN_HELD,
        '{"reason": "x", "n": ' + "[" * 129 + "]" * 129 + "}",
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="nested-past-the-depth-limit",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_RUN_HELD,
        '{"reason": "x", "n": ' + "[" * 900 + "]" * 900 + "}",
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="nested-to-python-recursion-limit",
    ),
    pytest.param(
        K.JOURNAL_ENTRY_KIND_RUN_HELD,
        '{"reason": "x", "n": ' + "[" * 100_000 + "]" * 100_000 + "}",
        grpc.StatusCode.INVALID_ARGUMENT,
        "JOURNAL_PAYLOAD_INVALID",
        id="nested-100000-deep",
    ),
]


@pytest.mark.parametrize(("kind", "payload", "code", "reason"), BAD_APPENDS)
def test_bad_appends_are_refused_and_leave_the_journal_unchanged(
    ledger_server: LedgerClients, kind: int, payload: str, code: grpc.StatusCode, reason: str
) -> None:
    ledger_server.ledger().CreateRun(run_request())
    first = append(
        ledger_server,
        "run-1",
        "",
        K.JOURNAL_ENTRY_KIND_RUN_STARTED,
        {"task_id": "t", "attempt_id": "a"},
    )
    expect_error(
        code,
        reason,
        lambda: ledger_server.ledger().AppendJournalEntry(
            ledger_pb2.AppendJournalEntryRequest(
                run_id="run-1",
                expected_head_hash=first.hash,
                kind=kind,
                payload_json=payload,  # type: ignore[arg-type]
            )
        ),
    )
    assert [e.hash for e in journal(ledger_server, "run-1")] == [first.hash]


def test_missing_fields_and_unknown_runs_are_refused(ledger_server: LedgerClients) -> None:
    stub = ledger_server.ledger()
    expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_REQUIRED",
        lambda: stub.AppendJournalEntry(
            ledger_pb2.AppendJournalEntryRequest(
                kind=K.JOURNAL_ENTRY_KIND_RUN_HELD, payload_json='{"reason":"x"}'
            )
        ),
    )
    expect_error(
        grpc.StatusCode.NOT_FOUND,
        "RUN_NOT_FOUND",
        lambda: stub.AppendJournalEntry(
            ledger_pb2.AppendJournalEntryRequest(
                run_id="nope", kind=K.JOURNAL_ENTRY_KIND_RUN_HELD, payload_json='{"reason":"x"}'
            )
        ),
    )
    for expected_head_hash in ("abc", NEWLINE_DIGEST):
        expect_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            "FIELD_INVALID",
            lambda head=expected_head_hash: stub.AppendJournalEntry(  # type: ignore[misc]
                ledger_pb2.AppendJournalEntryRequest(
                    run_id="run-x",
                    expected_head_hash=head,
                    kind=K.JOURNAL_ENTRY_KIND_RUN_HELD,
                    payload_json='{"reason":"x"}',
                )
            ),
        )
    error = expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "RUN_INVALID",
        lambda: stub.CreateRun(run_request(configuration_digest=NEWLINE_DIGEST)),
    )
    assert [v.field for v in error.field_violations] == ["configuration_digest"]
    error = expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "RUN_INVALID",
        lambda: stub.CreateRun(ledger_pb2.CreateRunRequest(run_id="r")),
    )
    assert {v.field for v in error.field_violations} >= {
        "task_id",
        "attempt_id",
        "configuration_digest",
        "command_limit",
    }


def test_read_pages_and_stream_follow(ledger_server: LedgerClients) -> None:
    ledger_server.ledger().CreateRun(run_request())
    head = ""
    for index in range(5):
        head = append(
            ledger_server, "run-1", head, K.JOURNAL_ENTRY_KIND_RUN_HELD, {"reason": f"r{index}"}
        ).hash
    reader = ledger_server.ledger("reader-token")
    page = reader.ReadJournal(
        ledger_pb2.ReadJournalRequest(run_id="run-1", from_sequence=2, page_size=2)
    )
    assert (
        [e.sequence for e in page.entries] == [2, 3]
        and page.next_sequence == 4
        and page.head.sequence == 5
    )
    last = reader.ReadJournal(
        ledger_pb2.ReadJournalRequest(run_id="run-1", from_sequence=4, page_size=10)
    )
    assert [e.sequence for e in last.entries] == [4, 5] and last.next_sequence == 0

    channel = ledger_server.channel("reader-token")
    from forge.continuity.v1 import ledger_pb2_grpc

    stream = ledger_pb2_grpc.LedgerServiceStub(channel).StreamJournal(
        ledger_pb2.StreamJournalRequest(run_id="run-1", from_sequence=4, follow=True), timeout=20
    )
    seen = [next(stream).entry.sequence, next(stream).entry.sequence]
    append(ledger_server, "run-1", head, K.JOURNAL_ENTRY_KIND_RUN_HELD, {"reason": "late"})
    seen.append(next(stream).entry.sequence)
    channel.close()  # cancels the open stream
    assert seen == [4, 5, 6]


def test_pages_and_streams_of_large_payloads_stay_within_a_message_budget(
    ledger_server: LedgerClients,
) -> None:
    """Eight payloads of about 200 KiB: a page of 1000 asked for is cut after five (about 1 MiB,
    so well below a default client's 4 MiB), next_sequence goes on from there, and a stream (one
    entry a message, or batches) still delivers all eight."""
    ledger_server.ledger().CreateRun(run_request())
    head = ""
    for index in range(8):
        payload = {"reason": f"{index}:" + "x" * (200 * 1024)}
        head = append(ledger_server, "run-1", head, K.JOURNAL_ENTRY_KIND_RUN_HELD, payload).hash
    reader = ledger_server.ledger("reader-token")
    pages, sequence = [], 1
    while sequence:
        page = reader.ReadJournal(
            ledger_pb2.ReadJournalRequest(run_id="run-1", from_sequence=sequence, page_size=1000)
        )
        pages.append([e.sequence for e in page.entries])
        sequence = page.next_sequence
    assert pages == [[1, 2, 3, 4, 5], [6, 7, 8]]
    # What the checks read as "the journal" pages on, past a page's budget.
    assert [e.sequence for e in journal(ledger_server, "run-1")] == list(range(1, 9))
    for batch in (0, 1000):
        request = ledger_pb2.StreamJournalRequest(run_id="run-1", max_entries_per_message=batch)
        messages = [
            [e.sequence for e in (response.entries if batch else [response.entry])]
            for response in reader.StreamJournal(request, timeout=30)
        ]
        assert messages == (pages if batch else [[n] for n in range(1, 9)])


@pytest.mark.parametrize(
    ("request_fields", "fields"),
    [({"from_sequence": -1}, ["from_sequence"]), ({"page_size": -3}, ["page_size"])],
)
def test_negative_journal_paging_names_the_field(
    ledger_server: LedgerClients, request_fields: dict[str, int], fields: list[str]
) -> None:
    ledger_server.ledger().CreateRun(run_request())
    error = expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_INVALID",
        lambda: ledger_server.ledger("reader-token").ReadJournal(
            ledger_pb2.ReadJournalRequest(run_id="run-1", **request_fields)  # type: ignore[arg-type]
        ),
    )
    assert [v.field for v in error.field_violations] == fields
