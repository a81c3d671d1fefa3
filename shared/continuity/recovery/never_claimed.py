"""The never-claimed failed-request recovery: a request that failed before any worker claimed it
is queued again, once, in the same attempt. The descriptor's defaults are this workflow."""

from __future__ import annotations

from typing import Final

from shared.continuity.recovery.workflow import Rpc, Rpcs, Workflow
from shared.continuity.request_history import NEVER_CLAIMED

WORKFLOW: Final = Workflow(
    name=NEVER_CLAIMED,
    number=1,
    action="request_invalid_read_recovery",
    acknowledgements=(
        "acknowledge_never_claimed",
        "acknowledge_same_request_and_attempt",
        "acknowledge_budgets_charged",
        "acknowledge_same_attempt_lease",
    ),
    roles=frozenset({"factory_administrator"}),
    rpcs=Rpcs(
        candidate=Rpc("GetInvalidReadRecoveryCandidate"),
        submit=Rpc("RequestInvalidReadRecovery"),
        read=Rpc("GetInvalidReadRecovery"),
    ),
    title="the never-claimed recovery",
)
