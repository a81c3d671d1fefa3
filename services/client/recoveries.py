"""The recovery workflows, thin wrappers: each has a candidate, a submission and a read-back.

Each submission is validated locally (identifiers, its acknowledgements exactly ``True``, the
window, the candidate digest) before it is sent; the acknowledgement names come from
``shared.contract.terms.RECOVERY_ACKNOWLEDGEMENTS``.
"""

from __future__ import annotations

from forge.continuity.v1 import admission_pb2, candidate_pb2
from services.client._base import ClientBase, invoke
from services.client._validation import (
    check_corrective_provider,
    check_identifiers,
    check_recovery,
    check_reviewed_rejection,
    in_contract_order,
)
from shared.contract.terms import RECOVERY_ACKNOWLEDGEMENTS


def _acknowledged(workflow: str) -> dict[str, bool]:
    """Every acknowledgement of ``workflow`` set to True (sent only after validation)."""
    return dict.fromkeys(RECOVERY_ACKNOWLEDGEMENTS[workflow], True)


class NeverClaimedRecoveryCalls(ClientBase):
    """Never-claimed failed-request recovery."""

    def invalid_read_recovery_candidate(
        self, run_id: str, request_id: str
    ) -> candidate_pb2.RecoveryCandidate:
        """The never-claimed failed-request recovery candidate (factory administrator)."""
        check_identifiers(run_id=run_id, request_id=request_id)
        request = candidate_pb2.GetInvalidReadRecoveryCandidateRequest(
            run_id=run_id, request_id=request_id
        )
        return invoke(self._candidate.GetInvalidReadRecoveryCandidate, request).candidate

    def request_invalid_read_recovery(
        self,
        run_id: str,
        request_id: str,
        recovery_id: str,
        *,
        candidate_digest: str | candidate_pb2.RecoveryCandidate,
        valid_for_seconds: int,
        acknowledge_never_claimed: bool,
        acknowledge_same_request_and_attempt: bool,
        acknowledge_budgets_charged: bool,
        acknowledge_same_attempt_lease: bool,
    ) -> admission_pb2.RequestInvalidReadRecoveryResponse:
        """Submit the never-claimed recovery once; keep ``recovery_id`` and read it back with
        :meth:`invalid_read_recovery` after a lost response."""
        workflow = "never_claimed"
        digest = check_recovery(
            run_id,
            request_id,
            recovery_id,
            candidate_digest,
            valid_for_seconds,
            in_contract_order(
                RECOVERY_ACKNOWLEDGEMENTS[workflow],
                {
                    "acknowledge_never_claimed": acknowledge_never_claimed,
                    "acknowledge_same_request_and_attempt": acknowledge_same_request_and_attempt,
                    "acknowledge_budgets_charged": acknowledge_budgets_charged,
                    "acknowledge_same_attempt_lease": acknowledge_same_attempt_lease,
                },
            ),
        )
        return invoke(
            self._admission.RequestInvalidReadRecovery,
            admission_pb2.RequestInvalidReadRecoveryRequest(
                run_id=run_id,
                request_id=request_id,
                recovery_id=recovery_id,
                candidate_digest=digest,
                valid_for_seconds=valid_for_seconds,
                **_acknowledged(workflow),
            ),
        )

    def invalid_read_recovery(self, run_id: str, request_id: str) -> admission_pb2.RecoveryOutcome:
        """The saved never-claimed recovery of a request."""
        check_identifiers(run_id=run_id, request_id=request_id)
        request = admission_pb2.GetInvalidReadRecoveryRequest(run_id=run_id, request_id=request_id)
        return invoke(self._admission.GetInvalidReadRecovery, request).outcome


class RejectedBoundaryRecoveryCalls(ClientBase):
    """Provider refusal before admission, from an administrator-reviewed rejection."""

    def rejected_boundary_recovery_candidate(
        self,
        run_id: str,
        request_id: str,
        reviewed_rejection: candidate_pb2.ReviewedProviderRejectionV1,
    ) -> candidate_pb2.RecoveryCandidate:
        """The provider-refusal candidate computed from an administrator-reviewed rejection."""
        check_identifiers(run_id=run_id, request_id=request_id)
        check_reviewed_rejection(reviewed_rejection)
        request = candidate_pb2.GetRejectedBoundaryCandidateRequest(
            run_id=run_id, request_id=request_id, reviewed_rejection=reviewed_rejection
        )
        return invoke(self._candidate.GetRejectedBoundaryCandidate, request).candidate

    def request_rejected_boundary_recovery(
        self,
        run_id: str,
        request_id: str,
        recovery_id: str,
        *,
        candidate_digest: str | candidate_pb2.RecoveryCandidate,
        reviewed_rejection: candidate_pb2.ReviewedProviderRejectionV1,
        valid_for_seconds: int,
        acknowledge_reviewed_provider_epoch: bool,
        acknowledge_no_response_or_tool_replay: bool,
        acknowledge_same_request_and_budgets: bool,
        acknowledge_finite_ownership_lease: bool,
        corrective_provider: candidate_pb2.CorrectiveProviderConfigurationV1,
    ) -> admission_pb2.RequestRejectedBoundaryRecoveryResponse:
        """Submit the reviewed provider-refusal recovery once (RejectedBoundaryRecoveryInputV1)
        under the corrective provider configuration the request is sent under next."""
        workflow = "rejected_boundary"
        digest = check_recovery(
            run_id,
            request_id,
            recovery_id,
            candidate_digest,
            valid_for_seconds,
            in_contract_order(
                RECOVERY_ACKNOWLEDGEMENTS[workflow],
                {
                    "acknowledge_reviewed_provider_epoch": acknowledge_reviewed_provider_epoch,
                    "acknowledge_no_response_or_tool_replay": (
                        acknowledge_no_response_or_tool_replay
                    ),
                    "acknowledge_same_request_and_budgets": acknowledge_same_request_and_budgets,
                    "acknowledge_finite_ownership_lease": acknowledge_finite_ownership_lease,
                },
            ),
        )
        check_reviewed_rejection(reviewed_rejection)
        check_corrective_provider(corrective_provider, reviewed_rejection)
        return invoke(
            self._admission.RequestRejectedBoundaryRecovery,
            admission_pb2.RequestRejectedBoundaryRecoveryRequest(
                run_id=run_id,
                request_id=request_id,
                recovery_id=recovery_id,
                candidate_digest=digest,
                reviewed_rejection=reviewed_rejection,
                valid_for_seconds=valid_for_seconds,
                corrective_provider=corrective_provider,
                **_acknowledged(workflow),
            ),
        )

    def rejected_boundary_recovery(
        self, run_id: str, request_id: str
    ) -> admission_pb2.RecoveryOutcome:
        """The saved provider-refusal recovery of a request."""
        check_identifiers(run_id=run_id, request_id=request_id)
        request = admission_pb2.GetRejectedBoundaryRecoveryRequest(
            run_id=run_id, request_id=request_id
        )
        return invoke(self._admission.GetRejectedBoundaryRecovery, request).outcome


class ReadonlyObservationRecoveryCalls(ClientBase):
    """Read-only observation recovery."""

    def readonly_observation_recovery_candidate(
        self, run_id: str, request_id: str
    ) -> candidate_pb2.RecoveryCandidate:
        """The read-only observation recovery candidate (factory administrator)."""
        check_identifiers(run_id=run_id, request_id=request_id)
        request = candidate_pb2.GetReadonlyObservationCandidateRequest(
            run_id=run_id, request_id=request_id
        )
        return invoke(self._candidate.GetReadonlyObservationCandidate, request).candidate

    def request_readonly_observation_recovery(
        self,
        run_id: str,
        request_id: str,
        recovery_id: str,
        *,
        candidate_digest: str | candidate_pb2.RecoveryCandidate,
        valid_for_seconds: int,
        acknowledge_unavailable_observation: bool,
        acknowledge_no_original_callback_replay: bool,
        acknowledge_same_request_attempt_and_budgets: bool,
        acknowledge_finite_ownership_lease: bool,
    ) -> admission_pb2.RequestReadonlyObservationRecoveryResponse:
        """Submit the read-only observation recovery once (ReadonlyObservationRecoveryInputV1)."""
        workflow = "readonly_observation"
        digest = check_recovery(
            run_id,
            request_id,
            recovery_id,
            candidate_digest,
            valid_for_seconds,
            in_contract_order(
                RECOVERY_ACKNOWLEDGEMENTS[workflow],
                {
                    "acknowledge_unavailable_observation": acknowledge_unavailable_observation,
                    "acknowledge_no_original_callback_replay": (
                        acknowledge_no_original_callback_replay
                    ),
                    "acknowledge_same_request_attempt_and_budgets": (
                        acknowledge_same_request_attempt_and_budgets
                    ),
                    "acknowledge_finite_ownership_lease": acknowledge_finite_ownership_lease,
                },
            ),
        )
        return invoke(
            self._admission.RequestReadonlyObservationRecovery,
            admission_pb2.RequestReadonlyObservationRecoveryRequest(
                run_id=run_id,
                request_id=request_id,
                recovery_id=recovery_id,
                candidate_digest=digest,
                valid_for_seconds=valid_for_seconds,
                **_acknowledged(workflow),
            ),
        )

    def readonly_observation_recovery(
        self, run_id: str, request_id: str
    ) -> admission_pb2.RecoveryOutcome:
        """The saved read-only observation recovery of a request."""
        check_identifiers(run_id=run_id, request_id=request_id)
        request = admission_pb2.GetReadonlyObservationRecoveryRequest(
            run_id=run_id, request_id=request_id
        )
        return invoke(self._admission.GetReadonlyObservationRecovery, request).outcome
