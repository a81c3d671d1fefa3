"""The rejected-boundary candidate's own evidence: the review's pinned reports, and the
reproduction check (spec: "Forge reproduces the pending request through a sealed public SDK
transport and requires the exact wire bytes, history, settings, tool definitions, usage and
limits").

The review's source-validator and executable-probe reports must be stored intact and made for
the reviewed source revision, executable identity and provider epoch.

The ticket's derived checkpoint goes to reconstruction's ``ReproducePendingRequest``: the pinned
public SDK builds the request the continuation starts with, behind a sealed transport (no model
response, no callback, no network). The reproduced request must agree exactly with the retained
``model_request_sent`` entry (wire digest and length, and every part the entry retains) and with
the administrator's review (wire digest and length). Any difference, or a request that cannot be
reproduced, is the hold ``REQUEST_NOT_REPRODUCED``; the reproduction digest joins the candidate
digest, so admission's recomputation sees the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from services.candidate.domain.facts import is_refusal
from services.candidate.domain.model import Hold, HoldReason, PendingReproduction, hold
from services.candidate.domain.recovery.facts import RECOVERY_CHECKS, RecoveryFacts
from services.candidate.domain.sources import CandidateSources
from services.candidate.domain.workflows import RecoveryEvidence, RecoveryWorkflow
from shared.continuity.recovery.rejected_boundary.custody import ReviewedRejection
from shared.continuity.recovery.rejected_boundary.evidence import report_problems
from shared.continuity.request_history import RequestHistory
from shared.runtime.errors import DomainError

#: Part digests a retained ``model_request_sent`` may carry → the reproduction's part names.
RETAINED_PARTS: Final[Mapping[str, str]] = {
    "history_digest": "history",
    "model_settings_digest": "model_settings",
    "tool_definitions_digest": "tool_definitions",
    "request_parameters_digest": "request_parameters",
    "usage_digest": "usage",
    "limits_digest": "limits",
}


@dataclass(frozen=True)
class ReproductionCheck:
    """The holds of the comparison and the digest of the reproduced request ("" when none)."""

    holds: tuple[Hold, ...]
    reproduction_digest: str


def _retained(history: RequestHistory) -> Mapping[str, object] | None:
    """The one ``model_request_sent`` before the failure; None when there is not exactly one
    (``refusal_problems`` already holds on that)."""
    failed_at = history.claimed_failures[0][0] if history.claimed_failures else None
    found = [p for s, p in history.provider_requests if failed_at is None or s < failed_at]
    return found[0] if len(found) == 1 else None


def _differences(
    reproduced: PendingReproduction,
    retained: Mapping[str, object] | None,
    review: ReviewedRejection,
    checkpoint_digest: str,
) -> list[tuple[str, str]]:
    """(subject, detail) of every disagreement."""
    found: list[tuple[str, str]] = []
    if reproduced.derived_checkpoint_digest != checkpoint_digest:
        found.append(("derived_checkpoint_digest", "the reproduction read another checkpoint"))
    wire = (reproduced.wire_digest, reproduced.wire_length)
    if (review.wire_digest, review.wire_length) != wire:
        found.append(
            (
                "reviewed_rejection.wire_digest",
                "the reviewed wire digest and length are not the reproduced request's "
                f"({reproduced.wire_digest}, {reproduced.wire_length} bytes)",
            )
        )
    if retained is None:
        return found
    if (retained.get("wire_digest"), retained.get("wire_length")) != wire:
        found.append(
            (
                "model_request_sent.wire_digest",
                "the retained request's wire digest and length are not the reproduced request's "
                f"({reproduced.wire_digest}, {reproduced.wire_length} bytes)",
            )
        )
    if "model" in retained and retained["model"] != reproduced.model:
        found.append(("model_request_sent.model", "the retained model is not the reproduced one"))
    found += [
        (f"model_request_sent.{key}", f"the retained {part} is not the reproduced request's")
        for key, part in RETAINED_PARTS.items()
        if key in retained and retained[key] != reproduced.part_digests.get(part)
    ]
    return found


def reproduction_check(
    sources: CandidateSources,
    history: RequestHistory,
    review: ReviewedRejection,
    content: bytes | None,
) -> ReproductionCheck:
    """Reproduce the pending request from the ticket's derived checkpoint (``content``, read
    once with the facts; None when not stored intact) and compare it."""
    digest = history.derived_checkpoint_digest
    if content is None:
        return ReproductionCheck((), "")  # the checkpoint hold (CLOSURE_INCOMPLETE) stands
    try:
        reproduced = sources.reproduce_pending(content)
    except DomainError as refused:
        if not is_refusal(refused):
            raise
        return ReproductionCheck(
            (
                hold(
                    HoldReason.REQUEST_NOT_REPRODUCED,
                    refused.metadata.get("element") or refused.metadata.get("field") or digest,
                    f"{refused.reason}: {refused.message}",
                ),
            ),
            "",
        )
    holds = tuple(
        hold(HoldReason.REQUEST_NOT_REPRODUCED, subject, detail)
        for subject, detail in _differences(reproduced, _retained(history), review, digest)
    )
    return ReproductionCheck(holds, reproduced.reproduction_digest)


def report_holds(sources: CandidateSources, review: ReviewedRejection) -> list[Hold]:
    """The review's source-validator and executable-probe reports are pinned: stored intact and
    made for the reviewed source revision, executable identity and provider epoch."""
    return [
        hold(
            HoldReason.CLOSURE_INCOMPLETE if problem.missing else HoldReason.REFUSAL_NOT_PROVEN,
            problem.digest,
            problem.detail,
        )
        for problem in report_problems(review, sources.blob)
    ]


def evidence(sources: CandidateSources, facts: RecoveryFacts, judged: Any) -> RecoveryEvidence:
    """The reports and the reproduction; the review and the reproduction join the digest."""
    review = facts.inputs.reviewed
    if review is None:  # the candidate's request requires it
        raise ValueError("the rejected-boundary candidate needs its reviewed rejection")
    reproduction = reproduction_check(sources, facts.history, review, facts.resumed_checkpoint)
    return RecoveryEvidence(
        holds=(*report_holds(sources, review), *reproduction.holds),
        decided_on={
            # the review is part of what the decision rests on
            "reviewed_rejection_digest": review.digest,
            "pending_reproduction_digest": reproduction.reproduction_digest,
        },
    )


CANDIDATE: Final = RecoveryWorkflow(checks=RECOVERY_CHECKS, evidence=evidence)
