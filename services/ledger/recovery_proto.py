"""Protobuf ↔ domain translation of the ledger's recovery RPCs (kept apart from servicer.py)."""

from __future__ import annotations

from collections.abc import Callable

from forge.continuity.v1 import common_pb2, ledger_pb2
from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.recoveries import NEVER_CLAIMED
from services.ledger.transactions.readonly_observation import ObservationInput
from services.ledger.transactions.recovery_input import Recovery, RecoveryInput
from shared.continuity.timeutil import to_timestamp
from shared.contract.rejected_boundary_proto import corrective_provider, reviewed_rejection


def recovery_input(request: ledger_pb2.CommitInvalidReadRecoveryRequest) -> RecoveryInput:
    return RecoveryInput(
        run_id=request.run_id,
        request_id=request.request_id,
        recovery_id=request.recovery_id,
        actor=request.actor,
        request_content_digest=request.request_content_digest,
        candidate_digest=request.candidate_digest,
        expected_head_hash=request.expected_head_hash,
        policy_revision=request.policy_revision,
        valid_for_seconds=request.valid_for_seconds,
        workflow=request.workflow or NEVER_CLAIMED,
        reviewed=(
            reviewed_rejection(request.reviewed_rejection)
            if request.HasField("reviewed_rejection")
            else None
        ),
        corrective=(
            corrective_provider(request.corrective_provider)
            if request.HasField("corrective_provider")
            else None
        ),
        observation=(
            ObservationInput(
                derived_checkpoint=request.derived_checkpoint,
                derived_checkpoint_digest=request.derived_checkpoint_digest,
                witness_digest=request.observation_witness_digest,
            )
            if request.derived_checkpoint or request.derived_checkpoint_digest
            else None
        ),
    )


def recovery_to_proto(
    found: Recovery,
    execution_request: Callable[[ExecutionRequestRecord], common_pb2.ExecutionRequest],
) -> ledger_pb2.SavedRecovery:
    """The saved record, field by field, with its execution request as it is now."""
    saved = found.recovery
    return ledger_pb2.SavedRecovery(
        run_id=saved.run_id,
        request_id=saved.request_id,
        recovery_id=saved.recovery_id,
        workflow=saved.workflow,
        actor=saved.actor,
        execution_request=execution_request(found.execution_request),
        witness_sequence=saved.witness_sequence,
        event_sequence=saved.event_sequence,
        created_at=to_timestamp(saved.created_at),
        request_content_digest=saved.request_content_digest,
        candidate_digest=saved.candidate_digest,
        settlement_sequence=saved.settlement_sequence,
        reviewed_rejection_digest=saved.reviewed_rejection_digest,
        derived_checkpoint_digest=saved.derived_checkpoint_digest,
    )
