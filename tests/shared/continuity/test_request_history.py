"""The request-history reader: only native entries prove a failure before any claim."""

from __future__ import annotations

from dataclasses import dataclass

from shared.continuity.admissibility import check
from shared.continuity.admissibility_facts import Admissible, Consumed, Situation, Unresolved
from shared.continuity.canonical import canonical_text
from shared.continuity.request_history import never_claimed_facts, request_history

EXR = "exr_1"


@dataclass(frozen=True)
class Row:
    sequence: int
    kind: str
    payload_json: str
    actor: str = "platform"


def rows(*entries: tuple[str, dict[str, object]]) -> list[Row]:
    head = [
        ("run_held", {"reason": "invalid evidence query"}),
        ("migration_settlement", {"request_id": "req-1"}),
        ("ownership_claim", {"request_id": "req-1", "execution_request_id": EXR}),
    ]
    return [
        Row(index, kind, canonical_text(payload), "ada" if kind == "migration_settlement" else "x")
        for index, (kind, payload) in enumerate([*head, *entries], start=1)
    ]


FAILED = ("request_failed", {"execution_request_id": EXR, "lease_generation": 0, "reason": "r"})
CLAIMED = ("worker_claimed", {"execution_request_id": EXR, "lease_generation": 1})


def outcome(journal: list[Row], state: str = "failed") -> Admissible | Unresolved:
    history = request_history(journal, "req-1")
    return check(
        never_claimed_facts(
            history,
            Situation(
                state=state,
                outstanding=(),
                workflow_enabled=True,
                actor="ada",
                actor_has_authority=True,
                consumed=Consumed(),
            ),
        )
    )


def test_a_failure_at_generation_zero_before_any_claim_is_admissible() -> None:
    history = request_history(rows(FAILED), "req-1")
    assert history.original_actor == "ada" and history.execution_request_id == EXR
    assert history.unclaimed_failure_sequence == 4 and not history.worker_claims
    assert isinstance(outcome(rows(FAILED)), Admissible)


def test_a_failed_row_without_its_native_failure_is_no_proof() -> None:
    # The row says failed at generation 0 with no owner; the journal does not: held.
    held = outcome(rows())
    assert isinstance(held, Unresolved)
    assert [r.hold for r in held.refusals] == ["REQUEST_NOT_FAILED_UNCLAIMED"]


def test_a_claim_before_the_failure_holds_it() -> None:
    failed_after_claim = (
        "request_failed",
        {"execution_request_id": EXR, "lease_generation": 1, "reason": "r"},
    )
    held = outcome(rows(CLAIMED, failed_after_claim))
    assert isinstance(held, Unresolved)
    assert "WORKER_CLAIMED" in {r.hold for r in held.refusals}


def test_only_a_startup_annotation_may_follow_the_failure() -> None:
    annotation = ("startup_recovery_annotation", {"annotation": "pool restarted"})
    assert isinstance(outcome(rows(FAILED, annotation)), Admissible)
    later = outcome(rows(FAILED, annotation, ("tool_intent", {"call_id": "c1"})))
    assert isinstance(later, Unresolved)
    assert [(r.hold, r.subject) for r in later.refusals] == [("UNACCOUNTED_EFFECTS", "6")]


def test_a_durable_unknown_outcome_holds_it() -> None:
    unknown = ("tool_outcome", {"call_id": "c1", "status": "unknown"})
    journal = [
        Row(1, *map_kind(unknown)),
        *[Row(r.sequence + 1, r.kind, r.payload_json, r.actor) for r in rows(FAILED)],
    ]
    held = outcome(journal)
    assert isinstance(held, Unresolved)
    assert [r.hold for r in held.refusals] == ["UNRESOLVED_CUSTODY"]


def map_kind(entry: tuple[str, dict[str, object]]) -> tuple[str, str]:
    return entry[0], canonical_text(entry[1])


def test_a_witnessed_recovery_spends_the_request() -> None:
    witness = (
        "recovery_witness",
        {"recovery_id": "rec-1", "workflow": "never_claimed", "request_id": "req-1"},
    )
    history = request_history(rows(FAILED, witness), "req-1")
    assert history.spent_by("never_claimed") == ("rec-1",)
