"""The provider-refusal-before-admission (rejected-boundary) recovery as a workflow of the submit
driver (ADR 0007, ADR 0009).

Like the never-claimed recovery: the driver validates (the corrective provider configuration too:
well formed and not the rejected epoch), reads back by (run_id, request_id),
replays or refuses by the idempotency rule keyed by ``recovery_id``, recomputes the candidate
under the same reviewed rejection, compares its one digest and refuses a held candidate; the
ledger's one transaction runs the admissibility check again and appends the refusal settlement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Generic, Protocol, TypeVar

from services.admission.domain import (
    require_acknowledgements,
    require_digests,
    require_identifiers,
    require_window,
)
from services.admission.driver import Stored, Submitted
from services.admission.workflows.never_claimed import (
    RecoveryCandidateView,
    RecoveryCommit,
    RecoveryKey,
    find_recovery,
)
from shared.canonical import digest_of
from shared.contract import RECOVERY_ACKNOWLEDGEMENTS
from shared.rejected_boundary import REJECTED_BOUNDARY, ReviewedRejection
from shared.rejected_boundary_evidence import CorrectiveProvider

OutcomeT = TypeVar("OutcomeT")
OutcomeT_co = TypeVar("OutcomeT_co", covariant=True)


@dataclass(frozen=True)
class RejectedBoundaryRequest:
    """An administrator's rejected-boundary recovery (RejectedBoundaryRecoveryInputV1)."""

    run_id: str
    request_id: str
    recovery_id: str
    candidate_digest: str
    review: ReviewedRejection
    valid_for_seconds: int
    acknowledgements: Mapping[str, bool]
    #: The provider configuration or version the request is sent under next.
    corrective: CorrectiveProvider

    @property
    def key(self) -> RecoveryKey:
        return RecoveryKey(self.run_id, self.request_id, REJECTED_BOUNDARY)

    @property
    def action_id(self) -> str:
        return self.recovery_id

    @property
    def digests(self) -> Mapping[str, str]:
        return {"candidate_digest": self.candidate_digest}

    @property
    def content_digest(self) -> str:
        """What makes two submissions identical (the identity is compared separately). Stored
        recoveries carry it: its shape must never change. (``corrective_provider`` joined it with
        the field itself; a submission without one is refused before any comparison.)"""
        return digest_of(
            {
                "workflow": REJECTED_BOUNDARY,
                "run_id": self.run_id,
                "request_id": self.request_id,
                "recovery_id": self.recovery_id,
                "candidate_digest": self.candidate_digest,
                "reviewed_rejection": asdict(self.review),
                "valid_for_seconds": self.valid_for_seconds,
                "acknowledgements": dict(self.acknowledgements),
                "corrective_provider": asdict(self.corrective),
            }
        )


class RejectedBoundaryPort(Protocol[OutcomeT_co]):
    """What the workflow needs from the ledger and candidate services."""

    def stored_recovery(self, key: RecoveryKey) -> Stored[OutcomeT_co]: ...

    def rejected_boundary_candidate(
        self, run_id: str, request_id: str, review: ReviewedRejection
    ) -> RecoveryCandidateView: ...

    def commit_recovery(self, recovery: RecoveryCommit) -> Submitted[OutcomeT_co]: ...


class RejectedBoundaryRecovery(Generic[OutcomeT]):
    """The submit driver's workflow for the rejected-boundary recovery."""

    id_field = "recovery_id"

    def __init__(self, port: RejectedBoundaryPort[OutcomeT]) -> None:
        self._port = port

    def validate(self, request: RejectedBoundaryRequest) -> None:
        require_identifiers(
            {
                "run_id": request.run_id,
                "request_id": request.request_id,
                "recovery_id": request.recovery_id,
            }
        )
        require_acknowledgements(
            request.acknowledgements, RECOVERY_ACKNOWLEDGEMENTS[REJECTED_BOUNDARY]
        )
        require_window(request.valid_for_seconds)
        require_digests({"candidate_digest": request.candidate_digest})
        request.review.validate()
        # well formed and not the rejected epoch; the ledger checks the stored document at commit
        request.corrective.validate(request.review)

    def read_back(self, request: RejectedBoundaryRequest) -> Stored[OutcomeT] | None:
        return find_recovery(self._port, request.key)

    def candidate(self, request: RejectedBoundaryRequest) -> RecoveryCandidateView:
        return self._port.rejected_boundary_candidate(
            request.run_id, request.request_id, request.review
        )

    def commit(
        self, request: RejectedBoundaryRequest, identity: str, candidate: RecoveryCandidateView
    ) -> Submitted[OutcomeT]:
        return self._port.commit_recovery(
            RecoveryCommit(
                run_id=request.run_id,
                request_id=request.request_id,
                recovery_id=request.recovery_id,
                actor=identity,
                request_content_digest=request.content_digest,
                candidate_digest=candidate.candidate_digest,
                expected_head_hash=candidate.journal_head_hash,
                policy_revision=candidate.policy_revision,
                valid_for_seconds=request.valid_for_seconds,
                workflow=REJECTED_BOUNDARY,
                reviewed=request.review,
                corrective=request.corrective,
            )
        )
