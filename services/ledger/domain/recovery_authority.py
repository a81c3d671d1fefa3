"""The authority each recovery workflow needs, and the source of current roles.

One table serves the recovery commit (R.4) and the later claim and command dispatch of the
request that recovery queued (11.5c, 13), so the role lists are written once."""

from __future__ import annotations

from collections.abc import Callable

from services.ledger.domain.recoveries import NEVER_CLAIMED, READONLY_OBSERVATION, REJECTED_BOUNDARY
from shared.continuity.rejected_boundary import REQUIRED_ROLES
from shared.runtime.errors import FailedPrecondition

#: The roles each workflow needs, held now by the ticket's original operator.
RECOVERY_ROLES = {
    NEVER_CLAIMED: frozenset({"factory_administrator"}),
    REJECTED_BOUNDARY: REQUIRED_ROLES,
    READONLY_OBSERVATION: REQUIRED_ROLES,
}
#: Current roles of an identity; the ledger asks again inside every recovery transaction.
Authority = Callable[[str], frozenset[str]]


def no_authority(identity: str) -> frozenset[str]:
    """Fail closed: without an authority source nobody may recover."""
    return frozenset()


def check_recovery_authority(
    authority: Authority, workflow: str, actor: str, execution_request_id: str
) -> None:
    """The recovery's actor still holds the roles its workflow required; revocation stops the
    claim and every later command dispatch of the request that recovery queued."""
    required = RECOVERY_ROLES[workflow]
    missing = sorted(required - authority(actor))
    if missing:
        raise FailedPrecondition(
            "RECOVERY_AUTHORITY_REVOKED",
            f"{actor}, who recovered this request ({workflow}), no longer holds "
            f"{', '.join(missing)}; revocation stops dispatch",
            metadata={
                "actor": actor,
                "execution_request_id": execution_request_id,
                "missing_roles": ",".join(missing),
                "workflow": workflow,
            },
        )
