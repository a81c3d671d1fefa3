"""The one rule for caller-chosen identifiers (run, request, recovery, command ids), and the one
bound on principal identities (the principals file's, forwarded as actors)."""

from __future__ import annotations

import re

from shared.runtime.auth import MAX_IDENTITY_LENGTH
from shared.runtime.errors import FieldViolation, InvalidArgument

__all__ = ["IDENTIFIER", "MAX_IDENTITY_LENGTH", "check_identifier", "identity_violations"]

# \Z, not $: "$" also matches before a trailing newline, which would let "id\n" through.
IDENTIFIER = re.compile(r"\A[A-Za-z0-9._:-]{1,128}\Z")


def check_identifier(field: str, value: str) -> None:
    """INVALID_ARGUMENT unless ``value`` is 1..128 characters of [A-Za-z0-9._:-]."""
    if not IDENTIFIER.match(value):
        raise InvalidArgument(
            "FIELD_INVALID" if value else "FIELD_REQUIRED",
            f"{field} must be 1..128 characters of [A-Za-z0-9._:-]",
            metadata={"field": field},
            field_violations=[FieldViolation(field, "1..128 characters of [A-Za-z0-9._:-]")],
        )


def identity_violations(field: str, value: str) -> list[FieldViolation]:
    """Why ``value`` cannot be recorded as a principal identity: empty or over-long."""
    if not value:
        return [FieldViolation(field, "required")]
    if len(value) > MAX_IDENTITY_LENGTH:
        return [FieldViolation(field, f"at most {MAX_IDENTITY_LENGTH} characters")]
    return []
