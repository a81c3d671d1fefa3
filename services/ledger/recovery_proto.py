"""Protobuf ↔ domain translation of the ledger's recovery RPCs (kept apart from servicer.py)."""

from __future__ import annotations

from collections.abc import Callable

from forge.continuity.v1 import common_pb2, ledger_pb2
from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.proto_convert import lease_bounds_to_proto
from services.ledger.transactions.recovery_input import Recovery, RecoveryInput
from shared.continuity.recovery import WORKFLOWS, DerivedCheckpoint
from shared.continuity.timeutil import to_timestamp
from shared.contract.recovery_proto import inputs_from_proto, workflow_number


def workflow_name(number: int) -> str:
    """The stored name of a contract ``RecoveryWorkflow`` value ("" when none is registered:
    the transaction refuses it as not submittable, the read as an unknown workflow)."""
    return next((w.name for w in WORKFLOWS.values() if w.number == number), "")


def recovery_input(request: ledger_pb2.CommitRecoveryRequest) -> RecoveryInput:
    derived = (
        DerivedCheckpoint(
            content=request.derived_checkpoint,
            digest=request.derived_checkpoint_digest,
            witness_digest=request.observation_witness_digest,
        )
        if request.derived_checkpoint or request.derived_checkpoint_digest
        else None
    )
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
        workflow=workflow_name(request.workflow),
        inputs=inputs_from_proto(request, present_only=True, derived=derived),
    )


def recovery_to_proto(
    found: Recovery,
    execution_request: Callable[[ExecutionRequestRecord], common_pb2.ExecutionRequest],
) -> common_pb2.RecoveryOutcome:
    """The saved record, field by field, with its execution request as it is now."""
    saved = found.recovery
    return common_pb2.RecoveryOutcome(
        run_id=saved.run_id,
        request_id=saved.request_id,
        recovery_id=saved.recovery_id,
        workflow=workflow_number(saved.workflow),
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
        lease_bounds=lease_bounds_to_proto(saved.lease_bounds),
    )
