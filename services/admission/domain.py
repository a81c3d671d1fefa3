"""Admission rules every workflow shares, without I/O: input checks (identifiers,
acknowledgements, the lease window, submitted digests), digest comparison, and turning a held
candidate into a precise refusal. Each check raises the same reason for every workflow."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from google.protobuf.message import Message

from shared.continuity.canonical import is_digest
from shared.continuity.identifiers import IDENTIFIER
from shared.contract.terms import MAX_WINDOW_SECONDS
from shared.runtime.errors import (
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    PreconditionViolation,
    field_invalid,
)


def _listing(names: Sequence[str]) -> str:
    """``a and b`` / ``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def require_identifiers(identifiers: Mapping[str, str]) -> None:
    """INVALID_ARGUMENT FIELD_INVALID naming every field that is not an identifier."""
    violations = [
        FieldViolation(name, "1..128 characters of [A-Za-z0-9._:-]")
        for name, value in identifiers.items()
        if not IDENTIFIER.match(value)
    ]
    if violations:
        raise InvalidArgument(
            "FIELD_INVALID",
            f"{_listing(list(identifiers))} must be identifiers",
            field_violations=violations,
        )


def require_version(version: int, expected: int) -> None:
    """INVALID_ARGUMENT VERSION_UNSUPPORTED unless the request names its route's version."""
    if version != expected:
        raise InvalidArgument(
            "VERSION_UNSUPPORTED",
            f"this route takes version {expected}, got {version}",
            metadata={"field": "version", "expected": str(expected)},
            field_violations=[FieldViolation("version", f"must be {expected}")],
        )


def require_acknowledgements(given: Mapping[str, bool], required: Sequence[str]) -> None:
    """INVALID_ARGUMENT ACKNOWLEDGEMENT_REQUIRED naming every required acknowledgement that is
    not exactly true."""
    missing = [name for name in required if given.get(name) is not True]
    if missing:
        raise InvalidArgument(
            "ACKNOWLEDGEMENT_REQUIRED",
            "every acknowledgement must be exactly true: " + ", ".join(missing),
            metadata={"missing": ",".join(missing)},
            field_violations=[FieldViolation(name, "must be true") for name in missing],
        )


def require_window(valid_for_seconds: int) -> None:
    """INVALID_ARGUMENT FIELD_INVALID unless the requested lease window is 1..MAX_WINDOW_SECONDS."""
    if not 1 <= valid_for_seconds <= MAX_WINDOW_SECONDS:
        raise field_invalid(
            "valid_for_seconds",
            f"must be in 1..{MAX_WINDOW_SECONDS}",
            f"valid_for_seconds must be in 1..{MAX_WINDOW_SECONDS}",
        )


def require_digests(digests: Mapping[str, str]) -> None:
    """INVALID_ARGUMENT FIELD_INVALID naming every submitted digest (keyed by its field path)
    that is not ``sha256:<64 hex>``."""
    bad = [field for field, value in digests.items() if not is_digest(value)]
    if bad:
        raise InvalidArgument(
            "FIELD_INVALID",
            "every digest must be sha256:<64 hex>, copied from the candidate",
            metadata={"field": ",".join(bad)},
            field_violations=[FieldViolation(field, "must be sha256:<64 hex>") for field in bad],
        )


def compare_digests(submitted: Mapping[str, str], current: Mapping[str, str]) -> None:
    """FAILED_PRECONDITION CANDIDATE_DIGEST_STALE naming each submitted digest the recomputed
    candidate no longer has (in the submitted order)."""
    stale = [name for name in submitted if submitted.get(name) != current.get(name)]
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
    """One hold of a candidate, by the short enum names (``POLICY_DISABLED``, ``POLICY``)."""

    reason: str
    requirement: str
    subject: str
    detail: str


def refuse_held(holds: Sequence[HoldView], handoff: Message | None = None) -> FailedPrecondition:
    """A held candidate supplies no claim: the refusal lists each hold and what clears it, and
    carries the candidate's handoff payload."""
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
        details=[handoff] if handoff is not None else [],
    )
