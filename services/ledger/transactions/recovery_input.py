"""What a recovery submits to the ledger, checked before the transaction, and what it answers
(the transaction is ``transactions/recovery.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.recoveries import (
    NEVER_CLAIMED,
    READONLY_OBSERVATION,
    REJECTED_BOUNDARY,
    WORKFLOWS,
    StoredRecovery,
)
from services.ledger.domain.runs import check_identifier
from services.ledger.transactions.readonly_observation import ObservationInput
from shared.continuity.canonical import is_digest
from shared.continuity.rejected_boundary import ReviewedRejection
from shared.continuity.rejected_boundary_evidence import CorrectiveProvider
from shared.contract.terms import MAX_WINDOW_SECONDS
from shared.runtime.errors import FieldViolation, InvalidArgument


@dataclass(frozen=True)
class RecoveryInput:
    """A never-claimed recovery the admission service validated; the ledger re-checks state."""

    run_id: str
    request_id: str
    recovery_id: str
    actor: str
    request_content_digest: str
    candidate_digest: str
    expected_head_hash: str
    policy_revision: int
    valid_for_seconds: int
    workflow: str = NEVER_CLAIMED
    #: Rejected boundary only: the administrator-reviewed rejection.
    reviewed: ReviewedRejection | None = None
    #: Rejected boundary only: the corrective provider configuration.
    corrective: CorrectiveProvider | None = None
    #: Read-only observation only: the derived checkpoint admission reconstructed.
    observation: ObservationInput | None = None

    def _workflow_violations(self) -> list[FieldViolation]:
        """The workflow is submittable and carries exactly its own fields."""
        violations: list[FieldViolation] = []
        if self.workflow not in WORKFLOWS:
            violations.append(FieldViolation("workflow", "not a submittable recovery workflow"))
        if (self.workflow == READONLY_OBSERVATION) != (self.observation is not None):
            violations.append(
                FieldViolation("derived_checkpoint", "required by (only) the read-only observation")
            )
        if self.observation is not None:
            violations += self.observation.violations()
        for name in ("reviewed", "corrective"):
            if (self.workflow == REJECTED_BOUNDARY) != (getattr(self, name) is not None):
                violations.append(
                    FieldViolation(
                        "reviewed_rejection" if name == "reviewed" else "corrective_provider",
                        "required by (only) the rejected boundary",
                    )
                )
        return violations

    def validate(self) -> None:
        for name in ("run_id", "request_id", "recovery_id"):
            check_identifier(name, getattr(self, name))
        violations = self._workflow_violations()
        if not self.actor:
            violations.append(FieldViolation("actor", "required"))
        for name in ("request_content_digest", "candidate_digest", "expected_head_hash"):
            if not is_digest(getattr(self, name)):
                violations.append(FieldViolation(name, "must be sha256:<64 hex>"))
        if not 1 <= self.valid_for_seconds <= MAX_WINDOW_SECONDS:
            violations.append(
                FieldViolation("valid_for_seconds", f"must be in 1..{MAX_WINDOW_SECONDS}")
            )
        if self.policy_revision <= 0:
            violations.append(FieldViolation("policy_revision", "must be positive"))
        if violations:
            raise InvalidArgument(
                "RECOVERY_INVALID",
                "; ".join(f"{v.field}: {v.description}" for v in violations),
                field_violations=violations,
            )
        if self.reviewed is not None:
            self.reviewed.validate()
            if self.corrective is not None:
                self.corrective.validate(self.reviewed)


@dataclass(frozen=True)
class Recovery:
    """A saved recovery, its execution request as it is now, and whether this call created it."""

    recovery: StoredRecovery
    execution_request: ExecutionRequestRecord
    created: bool
