"""The ReconciliationService servicer of the ledger process: protobuf ↔ domain, nothing else."""

from __future__ import annotations

from collections.abc import Callable

import grpc

from forge.continuity.v1 import (
    common_pb2,
    reconciliation_pb2,
    reconciliation_pb2_grpc,
)
from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.journal import EntryKind
from services.ledger.domain.reconciliation import (
    EntryRef,
    ReconcileInput,
    Snapshot,
    Verification,
    VerifyInput,
)
from services.ledger.proto_convert import lease_bounds_to_proto
from services.ledger.service import Ledger
from services.ledger.transactions.reconciliation import Reconciled
from services.ledger.transactions.reconciliation_review import Inspection
from shared.continuity.admissibility_facts import Unresolved
from shared.continuity.timeutil import to_timestamp
from shared.contract.handoff_proto import handoff_to_proto, refusal_to_hold
from shared.contract.terms import enum_number, enum_short_name
from shared.runtime.auth import current_principal

ToProto = Callable[[ExecutionRequestRecord], common_pb2.ExecutionRequest]


def _short(enum: object, value: int) -> str:
    """The lowercase short name of an enum value; "" for an unknown number (refused later)."""
    try:
        return enum_short_name(enum, value).lower()  # type: ignore[arg-type]
    except ValueError:
        return ""


def _entry_ref(ref: EntryRef) -> reconciliation_pb2.NativeEntryRef:
    return reconciliation_pb2.NativeEntryRef(
        journal_sequence=ref.sequence,
        kind=common_pb2.JournalEntryKind.ValueType(
            enum_number(common_pb2.JournalEntryKind, EntryKind(ref.kind).value)
        ),
        hash=ref.hash,
        lease_generation=ref.generation,
        foreign=ref.foreign,
    )


def verification_to_proto(v: Verification) -> reconciliation_pb2.ReconciliationVerification:
    effect = v.effect if v.effect in ("no_effect", "retry_safe") else "unspecified"
    return reconciliation_pb2.ReconciliationVerification(
        reconciliation_id=v.reconciliation_id,
        execution_request_id=v.execution_request_id,
        reconciliation_digest=v.reconciliation_digest,
        verifier=v.verifier,
        cessation_verified=v.cessation_verified,
        exposure_within_reservation=v.exposure_within_reservation,
        effect=enum_number(reconciliation_pb2.VerifiedEffect, effect),
        evidence_reference=v.evidence_reference,
        journal_sequence=v.sequence,
        verified_at=to_timestamp(v.verified_at),
        expires_at=to_timestamp(v.expires_at),
        requested_by=v.requested_by,
        detail=v.detail,
    )


def snapshot_to_proto(
    inspection: Inspection, to_proto: ToProto
) -> reconciliation_pb2.ReconciliationSnapshot:
    snapshot: Snapshot = inspection.snapshot
    outcome = inspection.outcome
    refusals = outcome.refusals if isinstance(outcome, Unresolved) else ()
    consumed = snapshot.consumed
    return reconciliation_pb2.ReconciliationSnapshot(
        run_id=snapshot.run_id,
        request_id=snapshot.request_id,
        attempt_id=snapshot.attempt_id,
        execution_request=to_proto(snapshot.record),
        claims=[
            reconciliation_pb2.LeaseClaim(
                journal_sequence=c.sequence, lease_generation=c.generation, worker=c.worker
            )
            for c in snapshot.claims
        ],
        lease_generations=list(snapshot.generations),
        deliveries=[_entry_ref(d) for d in snapshot.deliveries],
        later_entries=[_entry_ref(e) for e in snapshot.later_entries],
        request_chain=[to_proto(r) for r in snapshot.chain],
        holds=[refusal_to_hold(r) for r in refusals],
        handoff=handoff_to_proto(outcome.handoff),
        commands=reconciliation_pb2.CommandAccounting(
            used=snapshot.commands_used,
            limit=snapshot.command_limit,
            charged_under_request=list(snapshot.charged_under_request),
        ),
        tokens=common_pb2.ConsumedResources(
            model_responses_consumed=consumed.model_responses,
            tool_calls=consumed.tool_calls,
            commands_used=consumed.commands_used,
            command_limit=consumed.command_limit,
            deadline_remaining_seconds=consumed.deadline_remaining_seconds,
        ),
        time=reconciliation_pb2.TimeAccounting(
            reserved_lease_seconds=snapshot.reserved_lease_seconds,
            deadline_remaining_seconds=consumed.deadline_remaining_seconds,
        ),
        verifications=[verification_to_proto(v) for v in snapshot.verifications],
        reconciliation_digest=snapshot.digest,
        reconciliation_id=snapshot.reconciliation_id,
    )


def reconciliation_to_proto(
    found: Reconciled, to_proto: ToProto
) -> reconciliation_pb2.Reconciliation:
    saved = found.saved
    return reconciliation_pb2.Reconciliation(
        run_id=saved.run_id,
        request_id=saved.request_id,
        reconciliation_id=saved.reconciliation_id,
        decision=enum_number(reconciliation_pb2.ReconciliationDecision, saved.decision),
        actor=saved.actor,
        reconciliation_digest=saved.reconciliation_digest,
        evidence_reference=saved.evidence_reference,
        fenced_lease_generation=saved.fenced_lease_generation,
        verification_sequence=saved.verification_sequence,
        settlement_sequence=saved.settlement_sequence,
        reconciled_request=to_proto(found.reconciled),
        retry_request=to_proto(found.retry) if found.retry is not None else None,
        handoff=handoff_to_proto(saved.handoff),
        created_at=to_timestamp(saved.created_at),
        lease_bounds=lease_bounds_to_proto(saved.lease_bounds),
        cessation_unproven_acknowledged=saved.cessation_unproven_acknowledged,
    )


class ReconciliationServicer(reconciliation_pb2_grpc.ReconciliationServiceServicer):
    def __init__(self, ledger: Ledger, to_proto: ToProto) -> None:
        self._ledger = ledger
        self._to_proto = to_proto

    def InspectReconciliation(
        self,
        request: reconciliation_pb2.InspectReconciliationRequest,
        context: grpc.ServicerContext,
    ) -> reconciliation_pb2.InspectReconciliationResponse:
        inspection = self._ledger.inspect_reconciliation(
            request.run_id,
            request.execution_request_id,
            request.reconciliation_id,
            current_principal().identity,
        )
        return reconciliation_pb2.InspectReconciliationResponse(
            snapshot=snapshot_to_proto(inspection, self._to_proto)
        )

    def VerifyReconciliation(
        self, request: reconciliation_pb2.VerifyReconciliationRequest, context: grpc.ServicerContext
    ) -> reconciliation_pb2.VerifyReconciliationResponse:
        verification = self._ledger.verify_reconciliation(
            VerifyInput(
                run_id=request.run_id,
                execution_request_id=request.execution_request_id,
                reconciliation_id=request.reconciliation_id,
                reconciliation_digest=request.reconciliation_digest,
                evidence_reference=request.evidence_reference,
                actor=current_principal().identity,
            )
        )
        return reconciliation_pb2.VerifyReconciliationResponse(
            verification=verification_to_proto(verification)
        )

    def ReconcileExecutionRequest(
        self,
        request: reconciliation_pb2.ReconcileExecutionRequestRequest,
        context: grpc.ServicerContext,
    ) -> reconciliation_pb2.ReconcileExecutionRequestResponse:
        found = self._ledger.reconcile(
            ReconcileInput(
                run_id=request.run_id,
                execution_request_id=request.execution_request_id,
                reconciliation_id=request.reconciliation_id,
                expected_state=_short(common_pb2.ExecutionRequestState, request.expected_state),
                expected_lease_generation=request.expected_lease_generation,
                evidence_reference=request.evidence_reference,
                decision=_short(reconciliation_pb2.ReconciliationDecision, request.decision),
                reconciliation_digest=request.reconciliation_digest,
                actor=current_principal().identity,
                cessation_unproven_acknowledged=request.cessation_unproven_acknowledged,
            )
        )
        return reconciliation_pb2.ReconcileExecutionRequestResponse(
            reconciliation=reconciliation_to_proto(found, self._to_proto), created=found.created
        )

    def GetReconciliation(
        self, request: reconciliation_pb2.GetReconciliationRequest, context: grpc.ServicerContext
    ) -> reconciliation_pb2.GetReconciliationResponse:
        found = self._ledger.get_reconciliation(request.run_id, request.execution_request_id)
        return reconciliation_pb2.GetReconciliationResponse(
            reconciliation=reconciliation_to_proto(found, self._to_proto)
        )
