"""The never-claimed failed-request recovery: a request that failed before any worker claimed it
is queued again, once, in the same attempt. The descriptor's defaults are this workflow."""

from __future__ import annotations

from typing import Final

from shared.continuity.recovery.workflow import Applies, Rpc, Rpcs, Wording, Workflow
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
    applies=Applies(claimed=False),
    wording=Wording(
        heading="Failed admission (never claimed)",
        situation="The continuation failed before any worker claimed it: the same request is "
        "queued again, once, in the same attempt.",
        review="Review failed admission",
        note="Reviewing queues nothing. Requeue existing task records one operator action "
        "against this ticket: no replacement task, provider attempt, grant, replay or reset "
        "allowance.",
        acknowledgements=(
            ("acknowledge_never_claimed", "No worker ever claimed this ticket."),
            (
                "acknowledge_same_request_and_attempt",
                "The original request and attempt remain the same.",
            ),
            ("acknowledge_budgets_charged", "The original consumption and budgets stay charged."),
            ("acknowledge_same_attempt_lease", "Only the same-attempt ownership lease is renewed."),
        ),
    ),
)
