"""The provider-refusal-before-admission (rejected-boundary) recovery as a workflow of the submit
driver (ADR 0007, ADR 0009).

Like the never-claimed recovery (``recovery_base``): the driver validates (the corrective
provider configuration too: well formed and not the rejected epoch), reads back by
(run_id, request_id), replays or refuses by the idempotency rule keyed by ``recovery_id``,
recomputes the candidate under the same reviewed rejection, compares its one digest and refuses a
held candidate; the ledger's one transaction runs the admissibility check again and appends the
refusal settlement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Protocol, TypeVar

from services.admission.workflows.recovery_base import (
    RecoveryCandidateView,
    RecoveryPort,
    RecoveryRequest,
    RecoverySubmission,
)
from shared.continuity.rejected_boundary import REJECTED_BOUNDARY, ReviewedRejection
from shared.continuity.rejected_boundary_evidence import CorrectiveProvider

OutcomeT = TypeVar("OutcomeT")
OutcomeT_co = TypeVar("OutcomeT_co", covariant=True)


@dataclass(frozen=True)
class RejectedBoundaryRequest(RecoveryRequest):
    """An administrator's rejected-boundary recovery (RejectedBoundaryRecoveryInputV1)."""

    workflow: ClassVar[str] = REJECTED_BOUNDARY
    run_id: str
    request_id: str
    recovery_id: str
    candidate_digest: str
    review: ReviewedRejection
    valid_for_seconds: int
    acknowledgements: Mapping[str, bool]
    #: The provider configuration or version the request is sent under next.
    corrective: CorrectiveProvider

    def content_extra(self) -> dict[str, Any]:
        # ``corrective_provider`` joined the digest with the field itself; a submission without
        # one is refused before any comparison.
        return {
            "reviewed_rejection": asdict(self.review),
            "corrective_provider": asdict(self.corrective),
        }


class RejectedBoundaryPort(RecoveryPort[OutcomeT_co], Protocol[OutcomeT_co]):
    """What the workflow needs from the ledger and candidate services."""

    def rejected_boundary_candidate(
        self, run_id: str, request_id: str, review: ReviewedRejection
    ) -> RecoveryCandidateView: ...


class RejectedBoundaryRecovery(
    RecoverySubmission[RejectedBoundaryRequest, RecoveryCandidateView, OutcomeT]
):
    """The submit driver's workflow for the rejected-boundary recovery."""

    workflow = REJECTED_BOUNDARY

    def __init__(self, port: RejectedBoundaryPort[OutcomeT]) -> None:
        super().__init__(port)
        self._port = port

    def validate_more(self, request: RejectedBoundaryRequest) -> None:
        request.review.validate()
        # well formed and not the rejected epoch; the ledger checks the stored document at commit
        request.corrective.validate(request.review)

    def candidate(self, request: RejectedBoundaryRequest) -> RecoveryCandidateView:
        return self._port.rejected_boundary_candidate(
            request.run_id, request.request_id, request.review
        )

    def commit_extra(
        self, request: RejectedBoundaryRequest, candidate: RecoveryCandidateView
    ) -> dict[str, Any]:
        return {"reviewed": request.review, "corrective": request.corrective}
