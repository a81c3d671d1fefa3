"""The authority each recovery workflow needs, and the source of current roles.

The recovery-workflow registry (``shared.continuity.recovery``) names each workflow's roles once;
they serve the recovery commit (R.4) and the later claim and command dispatch of the request that
recovery queued (11.5c, 13)."""

from __future__ import annotations

from collections.abc import Callable

from shared.continuity.recovery import workflow as recovery_workflow
from shared.runtime.errors import FailedPrecondition

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
    required = recovery_workflow(workflow).roles
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
