"""Which worker records count as written under a request's fenced lease (issue 43): the pure rules
reconciliation and certification share, over journal entries as stored."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.ledger.domain.completion import certify
from services.ledger.domain.execution import ExecutionRequestRecord, RequestState
from services.ledger.domain.journal import StoredEntry
from services.ledger.domain.lease_records import LeaseFence, Standing
from services.ledger.domain.reconciliation import EntryRef, build_snapshot

EXR = "exr_lost"
HOLDER = "wanda-worker"
RECORD = ExecutionRequestRecord(
    execution_request_id=EXR,
    run_id="run-1",
    attempt_id="attempt-1",
    request_id="req-1",
    checkpoint_digest="sha256:" + "a" * 64,
    policy_revision=2,
    state=RequestState.CLAIMED,
    lease_generation=2,
    lease_seconds=900,
    lease_expires_at="2026-12-01T12:15:00.000000Z",
    owner=HOLDER,
    created_at="2026-12-01T12:00:00.000000Z",
    updated_at="2026-12-01T12:00:00.000000Z",
)


def lease(generation: int = 2) -> dict[str, Any]:
    return {"execution_request_id": EXR, "lease_generation": generation}


def claimed(generation: int = 2) -> tuple[str, dict[str, Any], str]:
    return "worker_claimed", lease(generation), HOLDER


def intent(call: str, actor: str = HOLDER, **named: Any) -> tuple[str, dict[str, Any], str]:
    payload = {"call_id": call, "tool_name": "run_command", "grant": "command"}
    return "tool_intent", {**payload, **(named or lease())}, actor


def outcome(
    call: str, status: str = "succeeded", actor: str = HOLDER, **named: Any
) -> tuple[str, dict[str, Any], str]:
    return "tool_outcome", {"call_id": call, "status": status, **(named or lease())}, actor


def journal(*rows: tuple[str, dict[str, Any], str]) -> list[StoredEntry]:
    return [
        StoredEntry("run-1", n, kind, json.dumps(payload), "", f"h{n}", actor, "")
        for n, (kind, payload, actor) in enumerate(rows, start=40)
    ]


def standings(rows: list[StoredEntry]) -> list[Standing]:
    fence = LeaseFence(EXR)
    return [fence.see(entry, json.loads(entry.payload_json)) for entry in rows]


def snapshot_of(rows: list[StoredEntry]) -> Any:
    return build_snapshot(
        RECORD,
        [RECORD],
        rows,
        command_limit=22,
        deadline_remaining_seconds=-1,
        reconciliation_id="rcn-1",
    )


FENCED, FOREIGN, OTHER = Standing.FENCED, Standing.FOREIGN, Standing.OTHER


def test_only_the_holder_of_the_open_lease_writes_under_it() -> None:
    rows = journal(
        outcome("c0"),  # before any claim
        claimed(1),
        intent("c1", **lease(1)),  # the holder, its generation
        intent("c2", actor="paul-writer", **lease(1)),  # a platform writer
        intent("c3", **lease(2)),  # a generation not claimed
        intent("c4", **{"execution_request_id": EXR}),  # names no generation
        ("request_failed", {**lease(1), "reason": "r"}, HOLDER),
        outcome("c1", **lease(1)),  # after the failure ended the lease
        claimed(2),
        outcome("c1", **lease(1)),  # the old generation after a new claim
        outcome("c5"),  # the new lease's holder
        outcome("c6", **{"execution_request_id": "exr_other", "lease_generation": 2}),
        outcome("c7", **{"lease_generation": 2, "other": True}),  # names no request
    )
    assert standings(rows) == [
        FOREIGN,
        OTHER,
        FENCED,
        FOREIGN,
        FOREIGN,
        FOREIGN,
        OTHER,
        FOREIGN,
        OTHER,
        FOREIGN,
        FENCED,
        OTHER,
        OTHER,
    ]


def test_reconciliation_counts_only_the_fenced_records_and_marks_the_others_foreign() -> None:
    rows = journal(
        claimed(),
        intent("c1"),
        outcome("c1", actor="paul-writer"),  # forged: closes nothing
        intent("c2", actor="walt-worker"),  # another worker's: opens nothing
        intent("c3"),
        outcome("c3", status="unknown"),
        # a native record naming no request does not make the holder's unknown outcome known
        ("tool_outcome", {"call_id": "c3", "status": "succeeded"}, "paul-writer"),
    )
    snapshot = snapshot_of(rows)
    assert [i.call_id for i in snapshot.open_intents] == ["c1", "c3"]
    assert snapshot.uncertain == ("c3",)
    assert [(d.sequence, d.foreign) for d in snapshot.deliveries] == [
        (40, False),
        (41, False),
        (42, True),
        (43, True),
        (44, False),
        (45, False),
    ]
    effects = {sequence: text for text, sequence in snapshot.known_effects()}
    assert "foreign" in effects[42] and "foreign" not in effects[41]


def test_a_record_naming_no_generation_is_not_described_under_generation_minus_one() -> None:
    rows = journal(
        claimed(),
        ("ownership_claim", {"execution_request_id": EXR}, "ledger"),
        intent("c1"),
    )
    effects = [text for text, _sequence in snapshot_of(rows).known_effects()]
    assert not [text for text in effects if "generation -1" in text], effects
    assert any(text.startswith("tool_intent under generation 2") for text in effects), effects


def test_a_journal_without_foreign_records_keeps_its_reconciliation_digest() -> None:
    """The marker enters the custody only where it is set, so snapshots inspected and verified
    before the fence keep their digests."""
    assert EntryRef(41, "tool_intent", "h41", 2).custody() == {
        "sequence": 41,
        "kind": "tool_intent",
        "hash": "h41",
        "generation": 2,
    }
    assert EntryRef(42, "tool_outcome", "h42", 2, foreign=True).custody()["foreign"] is True


@pytest.mark.parametrize(
    "forged",
    [
        outcome("c1", actor="paul-writer"),
        outcome("c1", actor="walt-worker"),
        outcome("c1", **lease(1)),
        ("tool_outcome", {"call_id": "c1", "status": "succeeded"}, "paul-writer"),
    ],
    ids=["platform-writer", "another-worker", "stale-generation", "native"],
)
def test_a_foreign_outcome_certifies_nothing(forged: tuple[str, dict[str, Any], str]) -> None:
    rows = journal(claimed(), intent("c1"), forged)
    certification = certify(rows, EXR, 2, 2)
    assert certification.open_intent_call_ids == ("c1",)
    assert not certification.certified
    closed = certify(journal(claimed(), intent("c1"), forged, outcome("c1")), EXR, 2, 2)
    assert closed.certified
