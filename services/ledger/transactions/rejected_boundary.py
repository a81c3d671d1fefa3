"""The rejected-boundary recovery's pinned evidence, read inside the recovery transaction
(``transactions/recovery.py`` step R.4b; ADR 0009)."""

from __future__ import annotations

from sqlalchemy import Connection

from services.ledger.repository import blobs as blob_rows
from shared.continuity.rejected_boundary import ReviewedRejection
from shared.continuity.rejected_boundary_evidence import (
    CorrectiveProvider,
    EvidenceProblem,
    corrective_problems,
    report_problems,
)
from shared.runtime.errors import FailedPrecondition, PreconditionViolation


def check_pinned_evidence(
    connection: Connection, review: ReviewedRejection, corrective: CorrectiveProvider
) -> None:
    """FAILED_PRECONDITION REVIEWED_REPORT_UNVERIFIED or CORRECTIVE_PROVIDER_UNVERIFIED when a
    pinned document is not stored intact or does not match the action now."""

    def content_of(digest: str) -> bytes | None:
        found = blob_rows.get_blob(connection, digest)
        return found[0] if found is not None else None

    for reason, problems in (
        ("REVIEWED_REPORT_UNVERIFIED", report_problems(review, content_of)),
        ("CORRECTIVE_PROVIDER_UNVERIFIED", corrective_problems(corrective, review, content_of)),
    ):
        if problems:
            raise _evidence_refusal(reason, problems)


def _evidence_refusal(reason: str, problems: tuple[EvidenceProblem, ...]) -> FailedPrecondition:
    return FailedPrecondition(
        reason,
        "; ".join(problem.detail for problem in problems),
        metadata={"fields": ",".join(sorted({problem.field for problem in problems}))},
        precondition_violations=[
            PreconditionViolation(
                "MISSING" if problem.missing else "MISMATCH", problem.digest, problem.detail
            )
            for problem in problems
        ],
    )
