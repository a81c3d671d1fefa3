"""The audit export's journal stream resumes after the last entry it received when the stream
ends UNAVAILABLE, as it does when a server recycles the connection at its maximum age
(FORGE_GRPC_MAX_CONNECTION_AGE_MS) or the ledger's stream time limit ends it
(STREAM_TIME_LIMIT, FORGE_MAX_STREAM_SECONDS) during a long export. A real server answers for
the ledger's contract with a scripted StreamJournal."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from forge.continuity.v1 import common_pb2, ledger_pb2
from services.client.audit import AuditCalls
from shared.runtime.auth import ANY_ROLE
from shared.runtime.config import Settings
from shared.runtime.errors import Unavailable
from shared.runtime.server import service_binding, start_server
from tests.support import directory

LEDGER = ledger_pb2.DESCRIPTOR.services_by_name["LedgerService"]


@pytest.mark.parametrize("batched", [False, True], ids=["one-entry-a-message", "batches"])
@pytest.mark.parametrize("cut", ["SERVICE_UNAVAILABLE", "STREAM_TIME_LIMIT"])
def test_a_journal_stream_cut_unavailable_resumes_after_its_last_entry(
    batched: bool, cut: str
) -> None:
    """The client asks for batches; a ledger older than batching answers one entry a message.
    The stream is cut as a connection at its maximum age is, or as the ledger's stream time limit
    ends it (ADR 0048)."""
    requested: list[int] = []

    def stream_journal(request: Any, _context: grpc.ServicerContext) -> Iterator[Any]:
        requested.append(request.from_sequence)
        assert request.max_entries_per_message > 0
        for first in range(request.from_sequence, 6, 2 if batched else 1):
            entries = [
                common_pb2.JournalEntry(run_id=request.run_id, sequence=sequence)
                for sequence in range(first, min(first + 2, 6) if batched else first + 1)
            ]
            if batched:
                yield ledger_pb2.StreamJournalResponse(entries=entries)
            else:
                yield ledger_pb2.StreamJournalResponse(entry=entries[0])
            if len(requested) == 1 and entries[-1].sequence == 2:
                raise Unavailable(cut, "the stream was cut", metadata={"next_sequence": "3"})

    def behaviour_of(name: str) -> Callable[[Any, grpc.ServicerContext], Any]:
        return stream_journal if name == "StreamJournal" else lambda _r, _c: None

    binding = service_binding(LEDGER, {m.name: ANY_ROLE for m in LEDGER.methods}, behaviour_of)
    running = start_server(
        Settings(service="ledger", host="127.0.0.1", port=0), [binding], directory()
    )
    target = f"127.0.0.1:{running.port}"
    calls = AuditCalls(
        "reader-token", ledger_target=target, candidate_target=target, admission_target=target
    )
    try:
        sequences = [entry.sequence for entry in calls._entries("run-1", 5)]
    finally:
        calls.close()
        running.stop(grace=0.5)
    assert sequences == [1, 2, 3, 4, 5]
    assert requested == [1, 3]
