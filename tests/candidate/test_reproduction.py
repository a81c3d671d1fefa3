"""The rejected-boundary candidate's reproduction check, over fake reads: every disagreement of the
reproduced request with the retained entry or the review is a REQUEST_NOT_REPRODUCED hold."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import pytest

from services.candidate.domain import HoldReason, PendingReproduction
from services.candidate.domain.recovery.rejected_boundary import reproduction_check
from shared.continuity.canonical import sha256_digest
from shared.continuity.recovery.rejected_boundary.custody import ReviewedRejection
from shared.continuity.request_history import RequestHistory, request_history
from shared.runtime.errors import FailedPrecondition

CHECKPOINT = b'{"derived":1}'
DIGEST = sha256_digest(CHECKPOINT)
WIRE = b'{"model":"gpt-4o","messages":[]}'
PARTS = {
    name: sha256_digest(name.encode())
    for name in (
        "history",
        "model_settings",
        "tool_definitions",
        "request_parameters",
        "usage",
        "limits",
    )
}
REPRODUCED = PendingReproduction(
    derived_checkpoint_digest=DIGEST,
    model="gpt-4o",
    wire_digest=sha256_digest(WIRE),
    wire_length=len(WIRE),
    part_digests=PARTS,
    reproduction_digest=sha256_digest(b"reproduction"),
)
REVIEW = ReviewedRejection(
    provider_epoch="e",
    wire_digest=sha256_digest(WIRE),
    wire_length=len(WIRE),
    endpoint="http://127.0.0.1:1/v1/chat/completions",
    principal="svc",
    model="gpt-4o",
    source_revision="rev-1",
    executable_identity="exe",
    source_validator_report_digest=sha256_digest(b"validator"),
    executable_probe_report_digest=sha256_digest(b"probe"),
    admissions=0,
    jobs=0,
    provider_dispatches=0,
    tool_callbacks=0,
)


@dataclass(frozen=True)
class Row:
    sequence: int
    kind: str
    payload_json: str
    actor: str = "ada"


def history(**retained: object) -> RequestHistory:
    entry = {
        "request_id": "req-1",
        "execution_request_id": "exr-1",
        "checkpoint_digest": DIGEST,
        "wire_digest": REPRODUCED.wire_digest,
        "wire_length": REPRODUCED.wire_length,
        "model": "gpt-4o",
        **{f"{name}_digest": digest for name, digest in PARTS.items()},
        **retained,
    }
    entries: list[tuple[str, dict[str, object]]] = [
        ("migration_settlement", {"request_id": "req-1", "derived_checkpoint_digest": DIGEST}),
        ("ownership_claim", {"request_id": "req-1", "execution_request_id": "exr-1"}),
        ("worker_claimed", {"execution_request_id": "exr-1", "lease_generation": 1}),
        ("model_request_sent", entry),
        ("request_failed", {"execution_request_id": "exr-1", "lease_generation": 1}),
    ]
    rows = [Row(i + 1, kind, json.dumps(payload)) for i, (kind, payload) in enumerate(entries)]
    return request_history(rows, "req-1")


class Reads:
    """The two reads the check rests on: the checkpoint blob (read once with the recovery's
    facts) and the reproduction."""

    def __init__(self, reproduced: PendingReproduction | Exception = REPRODUCED) -> None:
        self.reproduced = reproduced
        self.reproductions: list[bytes] = []

    def blob(self, digest: str) -> bytes | None:
        return CHECKPOINT if digest == DIGEST else None

    def reproduce_pending(self, derived_checkpoint: bytes) -> PendingReproduction:
        self.reproductions.append(derived_checkpoint)
        if isinstance(self.reproduced, Exception):
            raise self.reproduced
        return self.reproduced


def check(reads: Reads, found: RequestHistory, review: ReviewedRejection = REVIEW) -> Any:
    content = reads.blob(found.derived_checkpoint_digest)
    return reproduction_check(reads, found, review, content)  # type: ignore[arg-type]


def test_an_exact_agreement_holds_nothing_and_binds_the_reproduction() -> None:
    reads = Reads()
    result = check(reads, history())
    assert result.holds == () and result.reproduction_digest == REPRODUCED.reproduction_digest
    assert reads.reproductions == [CHECKPOINT]


@pytest.mark.parametrize(
    "retained, subject",
    [
        ({"wire_digest": sha256_digest(b"other")}, "model_request_sent.wire_digest"),
        ({"wire_length": len(WIRE) + 1}, "model_request_sent.wire_digest"),
        ({"model": "other"}, "model_request_sent.model"),
        *[
            ({f"{name}_digest": sha256_digest(b"other")}, f"model_request_sent.{name}_digest")
            for name in PARTS
        ],
    ],
)
def test_each_retained_difference_holds(retained: dict[str, object], subject: str) -> None:
    result = check(Reads(), history(**retained))
    assert [(h.reason, h.subject) for h in result.holds] == [
        (HoldReason.REQUEST_NOT_REPRODUCED, subject)
    ]


def test_a_review_of_other_bytes_holds() -> None:
    for review in (
        replace(REVIEW, wire_digest=sha256_digest(b"other")),
        replace(REVIEW, wire_length=len(WIRE) - 1),
    ):
        result = check(Reads(), history(), review)
        assert [h.subject for h in result.holds] == ["reviewed_rejection.wire_digest"]


def test_a_refused_reproduction_holds_naming_the_element() -> None:
    refused = FailedPrecondition(
        "PENDING_STATE_DIVERGED", "changed", metadata={"element": "model_settings"}
    )
    result = check(Reads(refused), history())
    [found] = result.holds
    assert (found.reason, found.subject) == (HoldReason.REQUEST_NOT_REPRODUCED, "model_settings")
    assert "PENDING_STATE_DIVERGED" in found.detail and result.reproduction_digest == ""


def test_a_missing_checkpoint_is_left_to_the_checkpoint_hold() -> None:
    reads = Reads()
    found = replace(history(), derived_checkpoint_digest=sha256_digest(b"absent"))
    assert check(reads, found).holds == () and reads.reproductions == []
