"""Reconciliation of a claimed request whose owner was lost: inspect, verify, decide, read back.

The decision is built from the inspected snapshot, so the expected state, lease generation and
reconciliation digest are carried, never typed by hand. Local validation (the decision name, a
non-empty evidence reference of at most 1024 characters) refuses with ``FIELD_INVALID``,
``origin=client``, before anything is sent.
"""

from __future__ import annotations

from forge.continuity.v1 import reconciliation_pb2
from services.client._base import ClientBase, invoke
from services.client._validation import check_identifiers, refuse_field

DECISIONS = {
    "retry_stage": reconciliation_pb2.RECONCILIATION_DECISION_RETRY_STAGE,
    "mark_unresolved": reconciliation_pb2.RECONCILIATION_DECISION_MARK_UNRESOLVED,
}
MAX_EVIDENCE_REFERENCE = 1024


def _check_evidence(evidence_reference: str) -> None:
    if not isinstance(evidence_reference, str) or not evidence_reference.strip():
        refuse_field("evidence_reference", "required: a non-empty string")
    if len(evidence_reference) > MAX_EVIDENCE_REFERENCE:
        refuse_field("evidence_reference", f"at most {MAX_EVIDENCE_REFERENCE} characters")


class ReconciliationCalls(ClientBase):
    """ReconciliationService (served by the ledger)."""

    def inspect_reconciliation(
        self, run_id: str, execution_request_id: str, reconciliation_id: str
    ) -> reconciliation_pb2.ReconciliationSnapshot:
        """The read-only snapshot and its reconciliation digest; writes nothing."""
        check_identifiers(
            run_id=run_id,
            execution_request_id=execution_request_id,
            reconciliation_id=reconciliation_id,
        )
        request = reconciliation_pb2.InspectReconciliationRequest(
            run_id=run_id,
            execution_request_id=execution_request_id,
            reconciliation_id=reconciliation_id,
        )
        return invoke(self._reconciliation.InspectReconciliation, request).snapshot

    def verify_reconciliation(
        self, snapshot: reconciliation_pb2.ReconciliationSnapshot, evidence_reference: str
    ) -> reconciliation_pb2.ReconciliationVerification:
        """Ask the deployment verifier about ``snapshot`` (factory administrator); only a complete
        proof is recorded."""
        _check_evidence(evidence_reference)
        request = reconciliation_pb2.VerifyReconciliationRequest(
            run_id=snapshot.run_id,
            execution_request_id=snapshot.execution_request.execution_request_id,
            reconciliation_id=snapshot.reconciliation_id,
            reconciliation_digest=snapshot.reconciliation_digest,
            evidence_reference=evidence_reference,
        )
        return invoke(self._reconciliation.VerifyReconciliation, request).verification

    def reconcile_execution_request(
        self,
        snapshot: reconciliation_pb2.ReconciliationSnapshot,
        *,
        decision: str,
        evidence_reference: str,
        cessation_unproven_acknowledged: bool = False,
    ) -> reconciliation_pb2.ReconcileExecutionRequestResponse:
        """The reviewed decision (``retry_stage`` or ``mark_unresolved``) on the inspected
        snapshot (factory administrator). Keep the snapshot's reconciliation_id and read the
        decision back with :meth:`reconciliation` after a lost response.
        ``cessation_unproven_acknowledged`` (``mark_unresolved`` only) releases the claim
        although no recorded verification proves its owner ceased (ADR 0045)."""
        if decision not in DECISIONS:
            refuse_field("decision", "retry_stage or mark_unresolved")
        _check_evidence(evidence_reference)
        current = snapshot.execution_request
        request = reconciliation_pb2.ReconcileExecutionRequestRequest(
            run_id=snapshot.run_id,
            execution_request_id=current.execution_request_id,
            reconciliation_id=snapshot.reconciliation_id,
            expected_state=current.state,
            expected_lease_generation=current.lease.generation,
            evidence_reference=evidence_reference,
            decision=DECISIONS[decision],
            reconciliation_digest=snapshot.reconciliation_digest,
            cessation_unproven_acknowledged=cessation_unproven_acknowledged,
        )
        return invoke(self._reconciliation.ReconcileExecutionRequest, request)

    def reconciliation(
        self, run_id: str, execution_request_id: str
    ) -> reconciliation_pb2.Reconciliation:
        """The saved decision of an execution request, read back."""
        check_identifiers(run_id=run_id, execution_request_id=execution_request_id)
        request = reconciliation_pb2.GetReconciliationRequest(
            run_id=run_id, execution_request_id=execution_request_id
        )
        return invoke(self._reconciliation.GetReconciliation, request).reconciliation
