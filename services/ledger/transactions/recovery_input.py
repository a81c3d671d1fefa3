"""What a recovery submits to the ledger, checked before the transaction, and what it answers
(the transaction is ``transactions/recovery.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.recoveries import StoredRecovery
from services.ledger.domain.runs import check_identifier
from shared.continuity.canonical import is_digest
from shared.continuity.identifiers import identity_violations
from shared.continuity.recovery import WORKFLOWS, Inputs
from shared.contract.terms import MAX_WINDOW_SECONDS
from shared.runtime.errors import FieldViolation, InvalidArgument


@dataclass(frozen=True)
class RecoveryInput:
    """A recovery of any workflow the admission service validated; the ledger re-checks
    state."""

    run_id: str
    request_id: str
    recovery_id: str
    actor: str
    request_content_digest: str
    candidate_digest: str
    expected_head_hash: str
    policy_revision: int
    valid_for_seconds: int
    #: The workflow's stored name ("" when the contract's value is unknown).
    workflow: str
    #: What the workflow carries beyond the common fields.
    inputs: Inputs = field(default_factory=Inputs)

    def _workflow_violations(self) -> list[FieldViolation]:
        """The workflow is submittable and carries exactly its own inputs."""
        found = WORKFLOWS.get(self.workflow)
        if found is None:
            return [FieldViolation("workflow", "not a submittable recovery workflow")]
        return found.input_violations(self.inputs)

    def validate(self) -> None:
        for name in ("run_id", "request_id", "recovery_id"):
            check_identifier(name, getattr(self, name))
        violations = self._workflow_violations()
        violations += identity_violations("actor", self.actor)
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
        WORKFLOWS[self.workflow].validate(self.inputs)


@dataclass(frozen=True)
class Recovery:
    """A saved recovery, its execution request as it is now, and whether this call created it."""

    recovery: StoredRecovery
    execution_request: ExecutionRequestRecord
    created: bool
