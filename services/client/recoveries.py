"""The recovery workflows: one generic set of calls that routes by workflow through the
recovery-workflow registry (``shared.continuity.recovery``: each workflow's RPCs and
acknowledgements), and thin wrappers with the spec's method names.

Each submission is validated locally (identifiers, its acknowledgements exactly ``True``, the
window, the candidate digest, then the inputs the workflow carries) before it is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf.message import Message

from forge.continuity.v1 import admission_pb2, candidate_pb2, common_pb2
from services.client._base import ClientBase, invoke
from services.client._validation import (
    check_corrective_provider,
    check_identifiers,
    check_recovery,
    check_reviewed_rejection,
    in_contract_order,
)
from shared.continuity.recovery import workflow as recovery_workflow
from shared.contract.recovery_proto import message_classes

CANDIDATE = candidate_pb2.DESCRIPTOR.services_by_name["CandidateService"]
ADMISSION = admission_pb2.DESCRIPTOR.services_by_name["AdmissionService"]


def _check_inputs(inputs: Mapping[str, Any]) -> None:
    """The local checks of the inputs a workflow carries, by their contract names."""
    if "reviewed_rejection" in inputs:
        check_reviewed_rejection(inputs["reviewed_rejection"])
        if "corrective_provider" in inputs:
            check_corrective_provider(inputs["corrective_provider"], inputs["reviewed_rejection"])


class RecoveryCalls(ClientBase):
    """The calls every recovery workflow has, by the workflow's stored name."""

    def recovery_workflows(self) -> admission_pb2.ListRecoveryWorkflowsResponse:
        """The recovery workflows the services route, as their registry describes them: when
        each applies, its routes and RPCs, acknowledgements (with the sentence an operator
        accepts) and typed inputs. Reads only; the whole response is returned."""
        return invoke(
            self._admission.ListRecoveryWorkflows, admission_pb2.ListRecoveryWorkflowsRequest()
        )

    def _recovery_candidate(
        self, name: str, run_id: str, request_id: str, **inputs: Message
    ) -> candidate_pb2.RecoveryCandidate:
        rpc = recovery_workflow(name).rpcs.candidate
        check_identifiers(run_id=run_id, request_id=request_id)
        _check_inputs(inputs)
        request_class, _ = message_classes(CANDIDATE, rpc)
        request = request_class(run_id=run_id, request_id=request_id, **inputs)
        candidate: candidate_pb2.RecoveryCandidate = invoke(
            getattr(self._candidate, rpc.name), request
        ).candidate
        return candidate

    def _request_recovery(
        self,
        name: str,
        run_id: str,
        request_id: str,
        recovery_id: str,
        *,
        candidate_digest: str | candidate_pb2.RecoveryCandidate,
        valid_for_seconds: int,
        acknowledgements: Mapping[str, bool],
        **inputs: Message,
    ) -> Any:
        workflow = recovery_workflow(name)
        digest = check_recovery(
            run_id,
            request_id,
            recovery_id,
            candidate_digest,
            valid_for_seconds,
            in_contract_order(workflow.acknowledgements, acknowledgements),
        )
        _check_inputs(inputs)
        rpc = workflow.rpcs.submit
        request_class, _ = message_classes(ADMISSION, rpc)
        request = request_class(
            run_id=run_id,
            request_id=request_id,
            recovery_id=recovery_id,
            candidate_digest=digest,
            valid_for_seconds=valid_for_seconds,
            # every acknowledgement, sent only after validation
            **dict.fromkeys(workflow.acknowledgements, True),
            **inputs,
        )
        return invoke(getattr(self._admission, rpc.name), request)

    def _recovery(self, name: str, run_id: str, request_id: str) -> common_pb2.RecoveryOutcome:
        rpc = recovery_workflow(name).rpcs.read
        check_identifiers(run_id=run_id, request_id=request_id)
        request_class, _ = message_classes(ADMISSION, rpc)
        outcome: common_pb2.RecoveryOutcome = invoke(
            getattr(self._admission, rpc.name), request_class(run_id=run_id, request_id=request_id)
        ).outcome
        return outcome


class NeverClaimedRecoveryCalls(RecoveryCalls):
    """Never-claimed failed-request recovery."""

    def invalid_read_recovery_candidate(
        self, run_id: str, request_id: str
    ) -> candidate_pb2.RecoveryCandidate:
        """The never-claimed failed-request recovery candidate (factory administrator)."""
        return self._recovery_candidate("never_claimed", run_id, request_id)

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
        response: admission_pb2.RequestInvalidReadRecoveryResponse = self._request_recovery(
            "never_claimed",
            run_id,
            request_id,
            recovery_id,
            candidate_digest=candidate_digest,
            valid_for_seconds=valid_for_seconds,
            acknowledgements={
                "acknowledge_never_claimed": acknowledge_never_claimed,
                "acknowledge_same_request_and_attempt": acknowledge_same_request_and_attempt,
                "acknowledge_budgets_charged": acknowledge_budgets_charged,
                "acknowledge_same_attempt_lease": acknowledge_same_attempt_lease,
            },
        )
        return response

    def invalid_read_recovery(self, run_id: str, request_id: str) -> common_pb2.RecoveryOutcome:
        """The saved never-claimed recovery of a request."""
        return self._recovery("never_claimed", run_id, request_id)


class RejectedBoundaryRecoveryCalls(RecoveryCalls):
    """Provider refusal before admission, from an administrator-reviewed rejection."""

    def rejected_boundary_recovery_candidate(
        self,
        run_id: str,
        request_id: str,
        reviewed_rejection: common_pb2.ReviewedProviderRejectionV1,
    ) -> candidate_pb2.RecoveryCandidate:
        """The provider-refusal candidate computed from an administrator-reviewed rejection."""
        return self._recovery_candidate(
            "rejected_boundary", run_id, request_id, reviewed_rejection=reviewed_rejection
        )

    def request_rejected_boundary_recovery(
        self,
        run_id: str,
        request_id: str,
        recovery_id: str,
        *,
        candidate_digest: str | candidate_pb2.RecoveryCandidate,
        reviewed_rejection: common_pb2.ReviewedProviderRejectionV1,
        valid_for_seconds: int,
        acknowledge_reviewed_provider_epoch: bool,
        acknowledge_no_response_or_tool_replay: bool,
        acknowledge_same_request_and_budgets: bool,
        acknowledge_finite_ownership_lease: bool,
        corrective_provider: common_pb2.CorrectiveProviderConfigurationV1,
    ) -> admission_pb2.RequestRejectedBoundaryRecoveryResponse:
        """Submit the reviewed provider-refusal recovery once (RejectedBoundaryRecoveryInputV1)
        under the corrective provider configuration the request is sent under next."""
        response: admission_pb2.RequestRejectedBoundaryRecoveryResponse = self._request_recovery(
            "rejected_boundary",
            run_id,
            request_id,
            recovery_id,
            candidate_digest=candidate_digest,
            valid_for_seconds=valid_for_seconds,
            acknowledgements={
                "acknowledge_reviewed_provider_epoch": acknowledge_reviewed_provider_epoch,
                "acknowledge_no_response_or_tool_replay": acknowledge_no_response_or_tool_replay,
                "acknowledge_same_request_and_budgets": acknowledge_same_request_and_budgets,
                "acknowledge_finite_ownership_lease": acknowledge_finite_ownership_lease,
            },
            reviewed_rejection=reviewed_rejection,
            corrective_provider=corrective_provider,
        )
        return response

    def rejected_boundary_recovery(
        self, run_id: str, request_id: str
    ) -> common_pb2.RecoveryOutcome:
        """The saved provider-refusal recovery of a request."""
        return self._recovery("rejected_boundary", run_id, request_id)


class ReadonlyObservationRecoveryCalls(RecoveryCalls):
    """Read-only observation recovery."""

    def readonly_observation_recovery_candidate(
        self, run_id: str, request_id: str
    ) -> candidate_pb2.RecoveryCandidate:
        """The read-only observation recovery candidate (factory administrator)."""
        return self._recovery_candidate("readonly_observation", run_id, request_id)

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
        response: admission_pb2.RequestReadonlyObservationRecoveryResponse = self._request_recovery(
            "readonly_observation",
            run_id,
            request_id,
            recovery_id,
            candidate_digest=candidate_digest,
            valid_for_seconds=valid_for_seconds,
            acknowledgements={
                "acknowledge_unavailable_observation": acknowledge_unavailable_observation,
                "acknowledge_no_original_callback_replay": (
                    acknowledge_no_original_callback_replay
                ),
                "acknowledge_same_request_attempt_and_budgets": (
                    acknowledge_same_request_attempt_and_budgets
                ),
                "acknowledge_finite_ownership_lease": acknowledge_finite_ownership_lease,
            },
        )
        return response

    def readonly_observation_recovery(
        self, run_id: str, request_id: str
    ) -> common_pb2.RecoveryOutcome:
        """The saved read-only observation recovery of a request."""
        return self._recovery("readonly_observation", run_id, request_id)
