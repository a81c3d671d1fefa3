"""The versioned continuity policy: read a revision, write the next one, list revisions."""

from __future__ import annotations

from services.ledger.domain.policy import PolicyRevision, PolicySettings, policy_digest
from services.ledger.repository import policy as policy_rows
from services.ledger.transactions.base import (
    LedgerContext,
    check_not_negative,
    lock_policy,
    retry_on_unique_conflict,
)
from shared.runtime.errors import Aborted, NotFound, PreconditionViolation

MAX_POLICY_PAGE = 500
DEFAULT_POLICY_PAGE = 50


def get(context: LedgerContext, revision: int) -> PolicyRevision:
    """Revision ``revision``, or the current one for 0 (or less)."""
    with context.read() as connection:
        if revision <= 0:
            return policy_rows.current_policy(connection)
        found = policy_rows.policy_revision(connection, revision)
    if found is None:
        raise NotFound(
            "POLICY_REVISION_NOT_FOUND",
            f"no policy revision {revision}",
            metadata={"revision": str(revision)},
        )
    return found


def _stale(expected_revision: int, current: int) -> Aborted:
    return Aborted(
        "POLICY_REVISION_STALE",
        f"policy is at revision {current}, not {expected_revision}",
        metadata={"current_revision": str(current), "expected_revision": str(expected_revision)},
        precondition_violations=[
            PreconditionViolation("POLICY_REVISION", "policy", f"current revision is {current}")
        ],
    )


def put(
    context: LedgerContext, expected_revision: int, settings: PolicySettings, actor: str
) -> PolicyRevision:
    """Write the next revision if ``expected_revision`` is still current."""
    return _write(context, expected_revision, settings.normalized(), actor)


@retry_on_unique_conflict
def _write(
    context: LedgerContext, expected_revision: int, settings: PolicySettings, actor: str
) -> PolicyRevision:
    # A concurrent writer that inserted the same revision first makes the retry see it as stale.
    with context.engine.begin() as connection:
        current = lock_policy(connection)
        if current.revision != expected_revision:
            raise _stale(expected_revision, current.revision)
        revision = current.revision + 1
        stored = PolicyRevision(
            revision, settings, actor, context.now(), policy_digest(revision, settings)
        )
        policy_rows.insert_policy_revision(connection, stored)
        return stored


def list_revisions(
    context: LedgerContext, before_revision: int, page_size: int
) -> list[PolicyRevision]:
    """Revisions newest first, older than ``before_revision`` (0: from the current one)."""
    check_not_negative(before_revision=before_revision, page_size=page_size)
    limit = min(page_size or DEFAULT_POLICY_PAGE, MAX_POLICY_PAGE)
    with context.read() as connection:
        return policy_rows.list_policy_revisions(connection, before_revision, limit)
