"""What each refusal of a continuation action is, in the one admissibility check's terms (ADR
0046): its concern and what would clear it. The ledger turns a refused worker claim, fenced
write, cancel, admission or recovery commit into ``RefusedAction`` facts with these, so the
check's handoff says what the refusal leaves permitted; ``docs/errors.md`` lists them (generated
by ``shared.continuity.reasons_doc`` through the check itself)."""

from __future__ import annotations

from collections.abc import Mapping

from shared.continuity.admissibility_facts import LEASE, REVIEW, TICKET, Concern, Refusal

_DEPENDENCY, _AUTHORIZATION = Concern.DEPENDENCY, Concern.AUTHORIZATION

#: A reason not listed takes the refused action's own default requirement (LEASE for a worker's
#: action and a cancel, REVIEW for a commit).
REFUSAL_CLASSES: Mapping[str, tuple[Concern, str]] = {
    **dict.fromkeys(
        (
            "NOT_LEASE_OWNER",
            "LEASE_GENERATION_STALE",
            "LEASE_EXPIRED",
            "LEASE_FENCED_BY_RECONCILIATION",
            "EXECUTION_REQUEST_CANCELLED",
            "EXECUTION_REQUEST_NOT_CLAIMED",
            "EXECUTION_REQUEST_NOT_QUEUED",
            "EXECUTION_REQUEST_NOT_CANCELLABLE",
            "WORKER_APPEND_NOT_LEASED",
            "COMMAND_RECEIPT_FENCED",
        ),
        (_DEPENDENCY, LEASE),
    ),
    **dict.fromkeys(
        ("OPERATOR_AUTHORITY_REVOKED", "RECOVERY_AUTHORITY_REVOKED", "CANCEL_NOT_PERMITTED"),
        (_AUTHORIZATION, "AUTHORITY"),
    ),
    "POLICY_DISABLED": (_AUTHORIZATION, "POLICY"),
    # re-enabling the policy revives nothing: the run is judged again
    "POLICY_REVOKED": (_AUTHORIZATION, REVIEW),
    **dict.fromkeys(
        ("PROFILE_NOT_QUALIFIED", "PROFILE_DIGEST_MISMATCH", "POLICY_EPOCH_UNRECOGNIZED"),
        (_DEPENDENCY, "QUALIFICATION"),
    ),
    **dict.fromkeys(
        ("CLAIM_CHECK_FAILED", "WORKER_SOURCE_CHANGED", "RUN_STARTED_SOURCE_CHANGED"),
        (_DEPENDENCY, "SOURCE"),
    ),
    "UNKNOWN_EFFECT_OUTSTANDING": (Concern.RESIDUAL_EFFECT, "CUSTODY"),
    **dict.fromkeys(
        (
            "JOURNAL_HEAD_STALE",
            "POLICY_REVISION_STALE",
            "POLICY_REVISION_CHANGED",
            "NATIVE_JOURNAL_CHANGED",
            "TICKET_CHANGED",
            "RUN_NOT_HELD",
            "CONSUMED_RESPONSE_MISMATCH",
        ),
        (_DEPENDENCY, REVIEW),
    ),
    **dict.fromkeys(
        (
            "CLAIM_OUTSTANDING",
            "CONSUMED_GRAPH_ALREADY_ADMITTED",
            "CONTINUITY_TICKET_OUTSTANDING",
            "PER_RUN_TICKET_LIMIT",
            "PENDING_TICKET_LIMIT",
        ),
        (_DEPENDENCY, TICKET),
    ),
    **dict.fromkeys(
        (
            "RECOVERY_ALREADY_SPENT",
            "RECOVERY_ID_CONFLICT",
            "RECOVERY_ID_OWNED_BY_ANOTHER_IDENTITY",
            "ACTION_IDENTITY_EXPIRED",
        ),
        (Concern.ACTION_IDENTITY, "NOT_ELIGIBLE"),
    ),
}


def refusal_of(reason: str, message: str, subject: str, default_requirement: str) -> Refusal:
    """The check's refusal for a continuation action refused with ``reason``."""
    concern, requirement = REFUSAL_CLASSES.get(reason, (_DEPENDENCY, default_requirement))
    return Refusal(concern, reason, requirement, subject, message)
