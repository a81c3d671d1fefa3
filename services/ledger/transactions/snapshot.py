"""One consistent read of everything a candidate is computed from: the run, its journal head, the
current policy, the run's execution requests, every journal entry up to that head, and the
ledger's recomputation of the chain over exactly those rows, all in one read transaction
(one snapshot), so a reader needs no re-read loop and the rows are verified once, where they are,
in the same pass that sends them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from services.ledger.database import snapshot_connection
from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.journal import StoredEntry
from services.ledger.domain.policy import PolicyRevision
from services.ledger.domain.runs import Run, check_identifier
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository import journal as journal_rows
from services.ledger.repository import policy as policy_rows
from services.ledger.repository import runs as run_rows
from services.ledger.transactions.base import LedgerContext, run_not_found
from services.ledger.transactions.journal import INTACT
from shared.journal_chain import ChainVerifier, Verification

# Entries per streamed batch: ~1-2 MiB of protobuf for typical payloads, far below the message cap.
SNAPSHOT_BATCH: Final = 2000


@dataclass(frozen=True)
class SnapshotHeader:
    """What the snapshot read besides the journal."""

    run: Run
    head: tuple[int, str]
    policy: PolicyRevision
    execution_requests: list[ExecutionRequestRecord]


SnapshotPart = SnapshotHeader | list[StoredEntry] | Verification


def read(context: LedgerContext, run_id: str) -> Iterator[SnapshotPart]:
    """The header, then the journal in batches, then the verification of the rows yielded. A
    missing run is NOT_FOUND RUN_NOT_FOUND, raised before the header."""
    check_identifier("run_id", run_id)
    with snapshot_connection(context.engine) as connection, connection.begin():
        found = run_rows.get_run_with_head(connection, run_id)
        if found is None:
            raise run_not_found(run_id)
        run, head = found
        yield SnapshotHeader(
            run=run,
            head=head,
            policy=policy_rows.current_policy(connection),
            execution_requests=request_rows.list_execution_requests(connection, run_id),
        )
        verifier = ChainVerifier(INTACT)
        for batch in journal_rows.journal_batches(connection, run_id, head[0], SNAPSHOT_BATCH):
            for entry in batch:
                verifier.add(entry)
            yield batch
        yield verifier.result()
