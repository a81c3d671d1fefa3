"""The worker's native turns for the model's runs, with the demo's pieces (services/demo): the
first provider request of a continuation, sent through the real pinned SDK over loopback HTTP to
a provider that refuses it before admission and retained as the spec says; and, after the
provider-refusal recovery, the same request answered and consumed, its evidence read's outcome
unknown and its listing retained. The claim and the failure around each turn are the rules'
checked calls; the journal lines in between are the lease holder's appends."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from forge.continuity.v1 import common_pb2, ledger_pb2, ledger_pb2_grpc
from services.demo.observation_turn import consumed_turn
from services.demo.provider import RefusingProvider, SentRequest, send_refused
from services.demo.refusal_story import PRINCIPAL
from tests.support import whole_journal

CONSUMED_AT = "2026-12-03T07:00:00.000000Z"


@dataclass(frozen=True)
class Ledgers:
    """The ledger as the lease holder (``journal``), a reader and the platform writer call it."""

    journal: ledger_pb2_grpc.LedgerServiceStub
    reader: ledger_pb2_grpc.LedgerServiceStub
    writer: ledger_pb2_grpc.LedgerServiceStub


def _append(
    ledgers: Ledgers, run_id: str, entries: Iterable[tuple[str, dict[str, object]]]
) -> None:
    for kind, payload in entries:
        head = whole_journal(ledgers.reader, run_id)[-1]
        ledgers.journal.AppendJournalEntry(
            ledger_pb2.AppendJournalEntryRequest(
                run_id=run_id,
                expected_head_hash=head.hash,
                kind=common_pb2.JournalEntryKind.Value(f"JOURNAL_ENTRY_KIND_{kind.upper()}"),
                payload_json=json.dumps(payload),
            )
        )


def refused_first_request(
    ledgers: Ledgers,
    claimed: common_pb2.ExecutionRequest,
    run_id: str,
    request_id: str,
    provider: RefusingProvider,
) -> SentRequest:
    """The claimed request's first provider request, refused by ``provider`` and retained under
    the claim's lease."""
    derived = ledgers.reader.GetBlob(ledger_pb2.GetBlobRequest(digest=claimed.checkpoint_digest))
    sent = send_refused(derived.content, provider)
    retained = sent.model_request_sent(
        request_id,
        claimed.execution_request_id,
        PRINCIPAL,
        lease_generation=claimed.lease.generation,
    )
    _append(ledgers, run_id, [("model_request_sent", retained)])
    return sent


def consumed_with_unknown_read(
    ledgers: Ledgers,
    claimed: common_pb2.ExecutionRequest,
    run: ledger_pb2.Run,
    request_id: str,
    sent: SentRequest,
) -> None:
    """The same request sent again (the same bytes from the same derived checkpoint), its
    answer consumed, both reads granted, the listing retained and the evidence read's outcome
    unknown: every line under the claim's lease."""
    provider_request = f"{request_id}-2"
    turn = consumed_turn(provider_request, CONSUMED_AT, source_revision=run.source_revision)
    for content in (turn.raw_response, turn.retained_result):
        stored = ledger_pb2.PutBlobRequest(content=content, media_type="application/json")
        ledgers.writer.PutBlob(stored)
    lease = {
        "execution_request_id": claimed.execution_request_id,
        "lease_generation": claimed.lease.generation,
    }
    retained = sent.model_request_sent(
        provider_request,
        claimed.execution_request_id,
        PRINCIPAL,
        lease_generation=claimed.lease.generation,
    )
    entries = [("model_request_sent", retained)]
    entries += [(kind, {**payload, **lease}) for kind, payload in turn.entries]
    _append(ledgers, run.run_id, entries)
