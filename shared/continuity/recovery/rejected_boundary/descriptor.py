"""The provider request refused before admission (the rejected-boundary recovery): what its
evidence adds to the one admissibility check, and the pinned documents its commit reads again.

The native history and the administrator's review are judged by ``custody.py`` beside this file;
the pinned reports and the corrective provider configuration by ``evidence.py``. The commit
appends the refusal settlement before the witness.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Final

from shared.continuity.admissibility_facts import ActionFacts, Situation
from shared.continuity.recovery.rejected_boundary.custody import (
    ASSERTION_KIND,
    REJECTED_BOUNDARY,
    REQUIRED_ROLES,
    ReviewedRejection,
    refusal_problems,
    rejected_boundary_facts,
)
from shared.continuity.recovery.rejected_boundary.evidence import (
    CorrectiveProvider,
    EvidenceProblem,
    corrective_problems,
    report_problems,
)
from shared.continuity.recovery.workflow import (
    Applies,
    ContentOf,
    Evidence,
    Inputs,
    Rpc,
    Rpcs,
    Wording,
    Workflow,
)
from shared.runtime.errors import FailedPrecondition, PreconditionViolation


def _review(inputs: Inputs) -> ReviewedRejection:
    if inputs.reviewed is None:  # refused earlier by Workflow.input_violations
        raise ValueError("the rejected boundary needs its reviewed rejection")
    return inputs.reviewed


def _corrective(inputs: Inputs) -> CorrectiveProvider:
    if inputs.corrective is None:  # refused earlier by Workflow.input_violations
        raise ValueError("the rejected boundary needs its corrective provider")
    return inputs.corrective


@dataclass(frozen=True)
class RejectedBoundary(Workflow):
    """The reviewed refusal, proven by the native history, resolves the worker claim."""

    def validate(self, inputs: Inputs) -> None:
        if inputs.reviewed is not None:
            inputs.reviewed.validate()
            if inputs.corrective is not None:
                # well formed and not the rejected epoch; the stored document is read at commit
                inputs.corrective.validate(inputs.reviewed)

    def judge(self, evidence: Evidence) -> tuple[str, ...]:
        return refusal_problems(
            evidence.history,
            _review(evidence.inputs),
            source_revision=evidence.source_revision,
            pending_checkpoint_digest=evidence.pending_checkpoint_digest,
        )

    def facts(self, evidence: Evidence, judged: Any, situation: Situation) -> ActionFacts:
        return rejected_boundary_facts(
            evidence.history,
            judged,
            situation,
        )

    def failed_sequence(self, evidence: Evidence, judged: Any) -> int:
        return evidence.history.claimed_failures[0][0]

    def commit_checks(self, evidence: Evidence, judged: Any, content_of: ContentOf) -> None:
        """R.4b FAILED_PRECONDITION REVIEWED_REPORT_UNVERIFIED or CORRECTIVE_PROVIDER_UNVERIFIED
        when a pinned document is not stored intact or does not match the action now."""
        review, corrective = _review(evidence.inputs), _corrective(evidence.inputs)
        for reason, problems in (
            ("REVIEWED_REPORT_UNVERIFIED", report_problems(review, content_of)),
            (
                "CORRECTIVE_PROVIDER_UNVERIFIED",
                corrective_problems(corrective, review, content_of),
            ),
        ):
            if problems:
                raise _evidence_refusal(reason, problems)

    def settlement(self, evidence: Evidence, judged: Any) -> dict[str, object]:
        review = _review(evidence.inputs)
        failed_sequence, failed_generation = evidence.history.claimed_failures[0]
        return {
            # an administrator-reviewed assertion with pinned evidence, never a receipt
            "assertion": ASSERTION_KIND,
            "reviewed_rejection_digest": review.digest,
            "reviewed_rejection": asdict(review),
            "failed_sequence": failed_sequence,
            "failed_generation": failed_generation,
        }

    def witness_fields(self, evidence: Evidence, judged: Any) -> dict[str, object]:
        return {"corrective_provider": asdict(_corrective(evidence.inputs))}

    def saved_fields(self, inputs: Inputs) -> dict[str, str]:
        return {"reviewed_rejection_digest": _review(inputs).digest}


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


WORKFLOW: Final = RejectedBoundary(
    name=REJECTED_BOUNDARY,
    number=2,
    action="request_rejected_boundary_recovery",
    acknowledgements=(
        "acknowledge_reviewed_provider_epoch",
        "acknowledge_no_response_or_tool_replay",
        "acknowledge_same_request_and_budgets",
        "acknowledge_finite_ownership_lease",
    ),
    roles=REQUIRED_ROLES,
    rpcs=Rpcs(
        candidate=Rpc("GetRejectedBoundaryCandidate"),
        submit=Rpc("RequestRejectedBoundaryRecovery"),
        read=Rpc("GetRejectedBoundaryRecovery"),
    ),
    policy_switch="allow_pre_admission_recovery",
    inputs=frozenset({"reviewed", "corrective"}),
    settlement_kind="refusal_settlement",
    title="the rejected boundary",
    applies=Applies(claimed=True),
    wording=Wording(
        heading="Provider refusal before admission",
        situation="The provider refused the worker's first request before admitting it; the "
        "administrator's review document (the reviewed rejection and the corrective provider "
        "configuration) shows why, and the same request is sent again under the corrective "
        "configuration.",
        review="Review provider rejection",
        note="Reviewing queues nothing. The reviewed rejection is recorded as an "
        "administrator-reviewed assertion, never as a provider receipt.",
        acknowledgements=(
            (
                "acknowledge_reviewed_provider_epoch",
                "The provider refused this request at the reviewed provider epoch, before "
                "admitting it.",
            ),
            (
                "acknowledge_no_response_or_tool_replay",
                "No model response and no tool callback is replayed.",
            ),
            (
                "acknowledge_same_request_and_budgets",
                "The same request, attempt and budgets continue; original usage stays charged.",
            ),
            (
                "acknowledge_finite_ownership_lease",
                "Only a finite ownership lease for the same attempt is granted.",
            ),
        ),
    ),
)
