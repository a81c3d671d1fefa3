"""The rejected-boundary evidence rules, pure: the reviewed rejection's field checks and what the
native history must show (``shared.continuity.recovery.rejected_boundary.custody``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pytest

from shared.continuity.admissibility import check
from shared.continuity.admissibility_facts import Admissible, Consumed, Situation, Unresolved
from shared.continuity.canonical import sha256_digest
from shared.continuity.recovery.rejected_boundary.custody import (
    ReviewedRejection,
    refusal_problems,
    rejected_boundary_facts,
)
from shared.continuity.request_history import request_history
from shared.runtime.errors import InvalidArgument

CHECKPOINT = sha256_digest(b"checkpoint")
WIRE = sha256_digest(b"wire")
EXR = "exr-1"


@dataclass(frozen=True)
class Row:
    sequence: int
    kind: str
    payload_json: str
    actor: str = "ada"


def rows(*entries: tuple[str, dict[str, object]]) -> list[Row]:
    return [Row(i + 1, kind, json.dumps(payload)) for i, (kind, payload) in enumerate(entries)]


SETTLED = (
    ("migration_settlement", {"request_id": "req-1", "derived_checkpoint_digest": CHECKPOINT}),
    ("ownership_claim", {"request_id": "req-1", "execution_request_id": EXR}),
)
CLAIMED = ("worker_claimed", {"execution_request_id": EXR, "lease_generation": 1})
SENT = (
    "model_request_sent",
    {
        "request_id": "req-1",
        "execution_request_id": EXR,
        "checkpoint_digest": CHECKPOINT,
        "wire_digest": WIRE,
        "wire_length": 42,
        "model": "m",
    },
)
FAILED = ("request_failed", {"execution_request_id": EXR, "lease_generation": 1})

REVIEW = ReviewedRejection(
    provider_epoch="e",
    wire_digest=WIRE,
    wire_length=42,
    endpoint="https://p.invalid",
    principal="svc",
    model="m",
    source_revision="rev-1",
    executable_identity="exe",
    source_validator_report_digest=sha256_digest(b"validator"),
    executable_probe_report_digest=sha256_digest(b"probe"),
    admissions=0,
    jobs=0,
    provider_dispatches=0,
    tool_callbacks=0,
)


def problems(
    *entries: tuple[str, dict[str, object]], review: ReviewedRejection = REVIEW
) -> tuple[str, ...]:
    history = request_history(rows(*SETTLED, *entries), "req-1")
    return refusal_problems(
        history, review, source_revision="rev-1", pending_checkpoint_digest=CHECKPOINT
    )


def test_the_supported_case_is_proven() -> None:
    assert problems(CLAIMED, SENT, FAILED) == ()


@pytest.mark.parametrize(
    "entries",
    [
        (),  # never claimed
        (FAILED,),  # a failure without a claim is the never-claimed workflow's
        (CLAIMED,),  # still running
        (CLAIMED, FAILED),  # no retained provider request
        (
            CLAIMED,
            SENT,
            ("response_consumed", {"request_id": "r", "response_digest": WIRE}),
            FAILED,
        ),
        (CLAIMED, SENT, FAILED, ("command_executed", {"command_id": "c"})),
        (CLAIMED, SENT, FAILED, CLAIMED, SENT, FAILED),  # a second claim: no retry loop
    ],
)
def test_anything_else_is_not_proven(entries: tuple[tuple[str, dict[str, object]], ...]) -> None:
    assert problems(*entries)


@pytest.mark.parametrize(
    "field, value",
    [("wire_digest", sha256_digest(b"x")), ("wire_length", 43), ("model", "other"),
     ("source_revision", "rev-2")],
)  # fmt: skip
def test_a_review_naming_another_request_is_not_proven(field: str, value: object) -> None:
    assert problems(CLAIMED, SENT, FAILED, review=replace(REVIEW, **{field: value}))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "field, value",
    [("jobs", 1), ("admissions", 1), ("provider_dispatches", 2), ("tool_callbacks", 1),
     ("wire_digest", "nope"), ("wire_length", 0), ("model", " ")],
)  # fmt: skip
def test_the_review_is_validated_field_by_field(field: str, value: object) -> None:
    with pytest.raises(InvalidArgument) as refused:
        replace(REVIEW, **{field: value}).validate()  # type: ignore[arg-type]
    assert refused.value.reason == "REVIEWED_REJECTION_INVALID"


def test_the_check_admits_only_a_proven_refusal() -> None:
    def outcome(found: tuple[str, ...], state: str = "failed") -> Admissible | Unresolved:
        history = request_history(rows(*SETTLED, CLAIMED, SENT, FAILED), "req-1")
        return check(
            rejected_boundary_facts(
                history,
                found,
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

    assert isinstance(outcome(()), Admissible)
    held = outcome(("unproven",))
    assert isinstance(held, Unresolved)
    assert {r.hold for r in held.refusals} == {"REFUSAL_NOT_PROVEN", "WORKER_CLAIMED"}
    claimed = outcome((), state="claimed")
    assert isinstance(claimed, Unresolved)
    assert {r.hold for r in claimed.refusals} == {"WORKER_CLAIMED"}
