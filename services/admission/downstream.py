"""Admission's ports over gRPC: the ledger and candidate services. Protobuf ↔
domain translation only; downstream refusals arrive as the typed domain errors they carried
(``shared.runtime.client.call``), so a refusal keeps its reason on its way back to the operator."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC
from typing import Any

from forge.continuity.v1 import (
    candidate_pb2,
    candidate_pb2_grpc,
    common_pb2,
    ledger_pb2,
    ledger_pb2_grpc,
)
from services.admission.domain import HoldView
from services.admission.driver import Stored, Submitted
from services.admission.workflows.invalid_read import (
    AdmissionKey,
    CandidateProof,
    InvalidReadCandidate,
)
from services.admission.workflows.recovery import (
    RecoveryCandidateView,
    RecoveryCommit,
    RecoveryKey,
)
from shared.continuity.commit_admission import CommitAdmission
from shared.continuity.idempotency import StoredAction
from shared.continuity.recovery import DerivedCheckpoint, Inputs, Workflow
from shared.contract.commit_admission_proto import commit_admission_to_proto
from shared.contract.recovery_proto import inputs_to_proto, message_classes, workflow_number
from shared.contract.terms import DIGEST_NAMES, enum_short_name
from shared.runtime.client import call

CANDIDATE_SERVICE = candidate_pb2.DESCRIPTOR.services_by_name["CandidateService"]


def _digests(message: common_pb2.ContinuityDigests) -> dict[str, str]:
    return {name: getattr(message, name) for name in DIGEST_NAMES}


def _hold(hold: common_pb2.Hold) -> HoldView:
    return HoldView(
        enum_short_name(common_pb2.HoldReason, hold.reason),
        enum_short_name(common_pb2.HoldRequirement, hold.requirement),
        hold.subject,
        hold.detail,
    )


def _stored_ticket(ticket: ledger_pb2.AdmissionTicket) -> Stored[ledger_pb2.AdmissionTicket]:
    return Stored(ticket, StoredAction(ticket.operator_identity, ticket.request_content_digest))


def _candidate(
    response: candidate_pb2.GetInvalidReadContinuityCandidateResponse,
) -> InvalidReadCandidate:
    candidate, proof = response.candidate, response.candidate.proof
    derived = response.admission_inputs if response.HasField("admission_inputs") else None
    return InvalidReadCandidate(
        run_id=candidate.run_id,
        eligible=candidate.eligible,
        version=candidate.version,
        digests=_digests(candidate.digests),
        holds=tuple(_hold(hold) for hold in candidate.holds),
        policy_revision=candidate.policy_revision,
        journal_head_hash=candidate.journal_head.hash,
        handoff=candidate.handoff,
        proof=CandidateProof(
            consumed_response_digest=proof.consumed_response_digest,
            derived_checkpoint_digest=proof.derived_checkpoint_digest,
            witness_digest=proof.witness_digest,
        ),
        derived=(
            DerivedCheckpoint(
                derived.derived_checkpoint,
                derived.derived_checkpoint_digest,
                derived.witness_digest,
            )
            if derived is not None
            else None
        ),
    )


def _recovery_candidate_view(candidate: candidate_pb2.RecoveryCandidate) -> RecoveryCandidateView:
    inputs = candidate.commit_inputs
    return RecoveryCandidateView(
        eligible=candidate.eligible,
        candidate_digest=candidate.candidate_digest,
        holds=tuple(_hold(hold) for hold in candidate.holds),
        policy_revision=candidate.policy_revision,
        journal_head_hash=candidate.journal_head.hash,
        handoff=candidate.handoff,
        proven_checkpoint_digest=candidate.observation.derived_checkpoint_digest,
        commit_inputs=(
            DerivedCheckpoint(
                inputs.derived_checkpoint, inputs.derived_checkpoint_digest, inputs.witness_digest
            )
            if candidate.HasField("commit_inputs")
            else None
        ),
    )


def _stored_recovery(saved: common_pb2.RecoveryOutcome) -> Stored[common_pb2.RecoveryOutcome]:
    # Found by its request and workflow: under another recovery id, the request's one action is
    # spent (RECOVERY_ALREADY_SPENT), which is not a conflict of the id submitted.
    return Stored(
        saved,
        StoredAction(
            saved.actor,
            saved.request_content_digest,
            action_id=saved.recovery_id,
            spends=f"request {saved.request_id}'s one recovery of this workflow",
            stored_at=saved.created_at.ToDatetime(tzinfo=UTC)
            if saved.HasField("created_at")
            else None,
        ),
    )


def _derived_fields(derived: DerivedCheckpoint | None) -> dict[str, Any]:
    if derived is None:
        return {}
    return {
        "derived_checkpoint": derived.content,
        "derived_checkpoint_digest": derived.digest,
        "observation_witness_digest": derived.witness_digest,
    }


@dataclass(frozen=True)
class Downstream:
    """The stubs admission coordinates (each channel carries admission's service identity); the
    invalid-read workflow's port over them."""

    ledger: ledger_pb2_grpc.LedgerServiceStub
    candidate: candidate_pb2_grpc.CandidateServiceStub

    def stored_ticket(self, key: AdmissionKey) -> Stored[ledger_pb2.AdmissionTicket]:
        response: ledger_pb2.GetAdmissionResponse = call(
            self.ledger.GetAdmission,
            ledger_pb2.GetAdmissionRequest(run_id=key.run_id, request_id=key.request_id),
        )
        return _stored_ticket(response.ticket)

    def invalid_read_candidate(self, run_id: str, version: int) -> InvalidReadCandidate:
        # With the candidate comes the derived checkpoint its one reconstruction produced: the
        # admission commits it, nothing is read or reconstructed again.
        response: candidate_pb2.GetInvalidReadContinuityCandidateResponse = call(
            self.candidate.GetInvalidReadContinuityCandidate,
            candidate_pb2.GetInvalidReadContinuityCandidateRequest(
                run_id=run_id, version=version, include_admission_inputs=True
            ),
        )
        return _candidate(response)

    def blob(self, digest: str) -> bytes:
        content: bytes = call(self.ledger.GetBlob, ledger_pb2.GetBlobRequest(digest=digest)).content
        return content

    def commit(self, admission: CommitAdmission) -> Submitted[ledger_pb2.AdmissionTicket]:
        committed: ledger_pb2.CommitAdmissionResponse = call(
            self.ledger.CommitAdmission,
            commit_admission_to_proto(admission),
        )
        return Submitted(committed.ticket, committed.created)

    # --- the recovery workflows' port ----------------------------------------------------------

    def stored_recovery(self, key: RecoveryKey) -> Stored[common_pb2.RecoveryOutcome]:
        response: ledger_pb2.GetRecoveryResponse = call(
            self.ledger.GetRecovery,
            ledger_pb2.GetRecoveryRequest(
                run_id=key.run_id, request_id=key.request_id, workflow=workflow_number(key.workflow)
            ),
        )
        return _stored_recovery(response.recovery)

    def recovery_candidate(
        self, workflow: Workflow, run_id: str, request_id: str, inputs: Inputs
    ) -> RecoveryCandidateView:
        """The workflow's candidate from its own RPC, with the commit inputs it computed."""
        request_class, _ = message_classes(CANDIDATE_SERVICE, workflow.rpcs.candidate)
        response = call(
            getattr(self.candidate, workflow.rpcs.candidate.name),
            request_class(
                run_id=run_id,
                request_id=request_id,
                include_commit_inputs=True,
                **inputs_to_proto(inputs, request_class.DESCRIPTOR),
            ),
        )
        return _recovery_candidate_view(response.candidate)

    def commit_recovery(self, recovery: RecoveryCommit) -> Submitted[common_pb2.RecoveryOutcome]:
        committed: ledger_pb2.CommitRecoveryResponse = call(
            self.ledger.CommitRecovery,
            ledger_pb2.CommitRecoveryRequest(
                run_id=recovery.run_id,
                request_id=recovery.request_id,
                recovery_id=recovery.recovery_id,
                actor=recovery.actor,
                request_content_digest=recovery.request_content_digest,
                candidate_digest=recovery.candidate_digest,
                expected_head_hash=recovery.expected_head_hash,
                policy_revision=recovery.policy_revision,
                valid_for_seconds=recovery.valid_for_seconds,
                workflow=workflow_number(recovery.workflow),
                **inputs_to_proto(recovery.inputs, ledger_pb2.CommitRecoveryRequest.DESCRIPTOR),
                **_derived_fields(recovery.inputs.derived),
            ),
        )
        return Submitted(committed.recovery, committed.created)
