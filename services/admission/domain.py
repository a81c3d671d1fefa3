"""Admission rules that need no I/O: input validation, the idempotency content digest, digest
comparison, and turning a held candidate into a precise refusal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shared.canonical import digest_of, is_digest
from shared.errors import (
    Conflict,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    PreconditionViolation,
)
from shared.identifiers import IDENTIFIER

DIGEST_NAMES = ("candidate_digest", "run_digest", "journal_digest", "policy_digest")
MAX_VALID_FOR_SECONDS = 7200
V1_ACKNOWLEDGEMENTS = (
    "acknowledge_no_new_grant",
    "acknowledge_original_consumption",
    "acknowledge_renewed_same_attempt_lease",
)
V2_ACKNOWLEDGEMENTS = (*V1_ACKNOWLEDGEMENTS, "acknowledge_unavailable_source_observations")


@dataclass(frozen=True)
class ContinuityRequest:
    """An operator's admission request, as submitted."""

    run_id: str
    request_id: str
    version: int
    expected_version: int
    valid_for_seconds: int
    digests: Mapping[str, str]
    acknowledgements: Mapping[str, bool]

    def validate(self) -> None:
        """INVALID_ARGUMENT naming every bad field; nothing is read or written before this."""
        violations: list[FieldViolation] = []
        for name in ("run_id", "request_id"):
            if not IDENTIFIER.match(getattr(self, name)):
                violations.append(FieldViolation(name, "1..128 characters of [A-Za-z0-9._:-]"))
        if violations:
            raise InvalidArgument(
                "FIELD_INVALID",
                "run_id and request_id must be identifiers",
                field_violations=violations,
            )
        if self.version != self.expected_version:
            raise InvalidArgument(
                "VERSION_UNSUPPORTED",
                f"this route takes version {self.expected_version}, got {self.version}",
                metadata={"field": "version", "expected": str(self.expected_version)},
                field_violations=[FieldViolation("version", f"must be {self.expected_version}")],
            )
        missing = [name for name, given in self.acknowledgements.items() if given is not True]
        if missing:
            raise InvalidArgument(
                "ACKNOWLEDGEMENT_REQUIRED",
                "every acknowledgement must be exactly true: " + ", ".join(missing),
                metadata={"missing": ",".join(missing)},
                field_violations=[FieldViolation(name, "must be true") for name in missing],
            )
        if not 1 <= self.valid_for_seconds <= MAX_VALID_FOR_SECONDS:
            raise InvalidArgument(
                "FIELD_INVALID",
                f"valid_for_seconds must be in 1..{MAX_VALID_FOR_SECONDS}",
                metadata={"field": "valid_for_seconds"},
                field_violations=[
                    FieldViolation("valid_for_seconds", f"must be in 1..{MAX_VALID_FOR_SECONDS}")
                ],
            )
        bad = [name for name in DIGEST_NAMES if not is_digest(self.digests.get(name, ""))]
        if bad:
            raise InvalidArgument(
                "FIELD_INVALID",
                "every digest must be sha256:<64 hex>, copied from the candidate",
                metadata={"field": ",".join(f"digests.{name}" for name in bad)},
                field_violations=[
                    FieldViolation(f"digests.{name}", "must be sha256:<64 hex>") for name in bad
                ],
            )

    @property
    def content_digest(self) -> str:
        """What makes two submissions "identical" (the identity is compared separately)."""
        return digest_of(
            {
                "run_id": self.run_id,
                "request_id": self.request_id,
                "version": self.version,
                "valid_for_seconds": self.valid_for_seconds,
                "digests": dict(self.digests),
                "acknowledgements": dict(self.acknowledgements),
            }
        )


def check_replay(
    request: ContinuityRequest, stored_operator: str, stored_content_digest: str, operator: str
) -> None:
    """An existing ticket for this request id may only be read back by an identical request."""
    if stored_operator != operator:
        raise Conflict(
            "REQUEST_ID_OWNED_BY_ANOTHER_IDENTITY",
            f"request {request.request_id} was submitted by another identity",
            metadata={"request_id": request.request_id},
        )
    if stored_content_digest != request.content_digest:
        raise Conflict(
            "REQUEST_ID_CONFLICT",
            f"request {request.request_id} was already submitted with different content",
            metadata={"request_id": request.request_id},
        )


def compare_digests(submitted: Mapping[str, str], current: Mapping[str, str]) -> None:
    """FAILED_PRECONDITION naming each stale digest when the candidate moved."""
    stale = [name for name in DIGEST_NAMES if submitted.get(name) != current.get(name)]
    if stale:
        raise FailedPrecondition(
            "CANDIDATE_DIGEST_STALE",
            "the candidate changed since it was read: " + ", ".join(stale),
            metadata={"stale": ",".join(stale)},
            precondition_violations=[
                PreconditionViolation(
                    "DIGEST", name, f"submitted {submitted.get(name)}, current {current.get(name)}"
                )
                for name in stale
            ],
        )


@dataclass(frozen=True)
class HoldView:
    reason: str
    requirement: str
    subject: str
    detail: str


def refuse_held(holds: Sequence[HoldView]) -> FailedPrecondition:
    """A held candidate supplies no claim: the refusal lists each hold and what clears it."""
    return FailedPrecondition(
        "CANDIDATE_HELD",
        "the candidate is held: " + ", ".join(sorted({hold.reason for hold in holds})),
        metadata={
            "holds": ",".join(hold.reason for hold in holds),
            "requirements": ",".join(sorted({hold.requirement for hold in holds})),
        },
        precondition_violations=[
            PreconditionViolation(hold.reason, hold.subject or hold.requirement, hold.detail)
            for hold in holds
        ],
    )
