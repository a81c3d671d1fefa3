"""The ExecutionService servicer of the ledger process: protobuf ↔ domain, nothing else."""

from __future__ import annotations

from datetime import datetime

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from forge.continuity.v1 import execution_pb2, execution_pb2_grpc
from services.ledger.domain.completion import Certification, GoalClaim
from services.ledger.domain.execution import RequestState, WorkerSource
from services.ledger.domain.owner_instance import OwnerInstance
from services.ledger.proto_convert import (
    entry_to_proto,
    execution_request_to_proto,
    state_from_proto,
)
from services.ledger.service import Ledger
from shared.continuity.timeutil import to_timestamp
from shared.runtime.auth import current_principal
from shared.runtime.errors import field_invalid, field_required

GOAL_CLAIMS = {
    execution_pb2.GOAL_CLAIM_UNSPECIFIED: GoalClaim.UNSTATED,
    execution_pb2.GOAL_CLAIM_SATISFIED: GoalClaim.SATISFIED,
    execution_pb2.GOAL_CLAIM_NOT_SATISFIED: GoalClaim.NOT_SATISFIED,
    execution_pb2.GOAL_CLAIM_UNKNOWN: GoalClaim.UNKNOWN,
}
GOAL_CLAIM_NUMBERS = {claim: number for number, claim in GOAL_CLAIMS.items()}


def goal_claim_from_proto(value: int) -> GoalClaim:
    try:
        return GOAL_CLAIMS[value]  # type: ignore[index]
    except KeyError:
        raise field_invalid(
            "goal_claim", "must be a known GoalClaim", f"unknown goal_claim {value}"
        ) from None


def certification_to_proto(found: Certification) -> execution_pb2.CompletionCertification:
    return execution_pb2.CompletionCertification(
        certified=found.certified,
        generation_current=found.generation_current,
        open_intent_call_ids=found.open_intent_call_ids,
        reconciliation_marker_sequences=found.reconciliation_marker_sequences,
    )


def _stamp(read_at: datetime) -> Timestamp:
    """The ledger's time of a read (``ledger_time``, ADR 0057) as a Timestamp."""
    stamp = Timestamp()
    stamp.FromDatetime(read_at)
    return stamp


def presented_source(
    request: execution_pb2.RecordCommandRequest
    | execution_pb2.CompleteExecutionRequestRequest
    | execution_pb2.FailExecutionRequestRequest,
) -> WorkerSource | None:
    """The worker's present source when the write carries one."""
    if not request.HasField("source"):
        return None
    return WorkerSource(
        source_revision=request.source.source_revision,
        configuration_digest=request.source.configuration_digest,
        source_profile=request.source.source_profile,
        attempt_id=request.source.attempt_id,
    )


class ExecutionServicer(execution_pb2_grpc.ExecutionServiceServicer):
    """Worker claims under fenced leases, and the command ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def ClaimExecutionRequest(
        self, request: execution_pb2.ClaimExecutionRequestRequest, context: grpc.ServicerContext
    ) -> execution_pb2.ClaimExecutionRequestResponse:
        record, entry = self._ledger.claim(
            request.execution_request_id,
            current_principal().identity,
            WorkerSource(
                source_revision=request.source_revision,
                configuration_digest=request.configuration_digest,
                source_profile=request.source_profile,
                attempt_id=request.attempt_id,
                profile_digest=request.profile_digest,
            ),
            (
                OwnerInstance(
                    host_boot_id=request.owner_instance.host_boot_id,
                    pid=request.owner_instance.pid,
                    process_start_ticks=request.owner_instance.process_start_ticks,
                    pid_namespace=request.owner_instance.pid_namespace,
                )
                if request.HasField("owner_instance")
                else None
            ),
        )
        return execution_pb2.ClaimExecutionRequestResponse(
            execution_request=execution_request_to_proto(record),
            worker_claimed_entry=entry_to_proto(entry),
            # the claim's own time on the ledger's clock: the claim stamps it as updated_at
            ledger_time=to_timestamp(record.updated_at),
        )

    def CompleteExecutionRequest(
        self, request: execution_pb2.CompleteExecutionRequestRequest, context: grpc.ServicerContext
    ) -> execution_pb2.CompleteExecutionRequestResponse:
        record, completion = self._ledger.complete(
            request.execution_request_id,
            current_principal().identity,
            request.lease_generation,
            goal_claim_from_proto(request.goal_claim),
            request.final_output_digest,
            presented=presented_source(request),
        )
        return execution_pb2.CompleteExecutionRequestResponse(
            execution_request=execution_request_to_proto(record),
            goal_claim=GOAL_CLAIM_NUMBERS[completion.goal_claim],
            certification=certification_to_proto(completion.certification),
            completed_rounds=completion.completed_rounds,
            journal_sequence=completion.journal_sequence,
        )

    def FailExecutionRequest(
        self, request: execution_pb2.FailExecutionRequestRequest, context: grpc.ServicerContext
    ) -> execution_pb2.FailExecutionRequestResponse:
        if not request.reason:
            raise field_required("reason")
        record = self._ledger.finish(
            request.execution_request_id,
            current_principal().identity,
            request.lease_generation,
            RequestState.FAILED,
            request.reason,
            presented_source(request),
        )
        return execution_pb2.FailExecutionRequestResponse(
            execution_request=execution_request_to_proto(record)
        )

    def FailUnclaimedExecutionRequest(
        self,
        request: execution_pb2.FailUnclaimedExecutionRequestRequest,
        context: grpc.ServicerContext,
    ) -> execution_pb2.FailUnclaimedExecutionRequestResponse:
        record = self._ledger.fail_unclaimed(
            request.execution_request_id, current_principal().identity, request.reason
        )
        return execution_pb2.FailUnclaimedExecutionRequestResponse(
            execution_request=execution_request_to_proto(record)
        )

    def GetExecutionRequest(
        self, request: execution_pb2.GetExecutionRequestRequest, context: grpc.ServicerContext
    ) -> execution_pb2.GetExecutionRequestResponse:
        record, read_at = self._ledger.read_execution_request(request.execution_request_id)
        return execution_pb2.GetExecutionRequestResponse(
            execution_request=execution_request_to_proto(record), ledger_time=_stamp(read_at)
        )

    def ListExecutionRequests(
        self, request: execution_pb2.ListExecutionRequestsRequest, context: grpc.ServicerContext
    ) -> execution_pb2.ListExecutionRequestsResponse:
        states = tuple(state_from_proto(value) for value in request.states)
        records, read_at = self._ledger.list_execution_requests(request.run_id, states)
        return execution_pb2.ListExecutionRequestsResponse(
            execution_requests=[execution_request_to_proto(r) for r in records],
            ledger_time=_stamp(read_at),
        )

    def ListAllExecutionRequests(
        self,
        request: execution_pb2.ListAllExecutionRequestsRequest,
        context: grpc.ServicerContext,
    ) -> execution_pb2.ListAllExecutionRequestsResponse:
        page = self._ledger.list_all_execution_requests(
            request.page_size, request.page_token, request.filter
        )
        return execution_pb2.ListAllExecutionRequestsResponse(
            execution_requests=[execution_request_to_proto(r) for r in page.execution_requests],
            next_page_token=page.next_page_token,
        )

    def RecordCommand(
        self, request: execution_pb2.RecordCommandRequest, context: grpc.ServicerContext
    ) -> execution_pb2.RecordCommandResponse:
        recorded = self._ledger.record_command(
            request.execution_request_id,
            current_principal().identity,
            request.lease_generation,
            request.command_id,
            request.command_digest,
            presented_source(request),
        )
        return execution_pb2.RecordCommandResponse(
            journal_sequence=recorded.journal_sequence,
            charged=recorded.charged,
            usage=execution_pb2.CommandUsage(used=recorded.used, limit=recorded.limit),
            journal_hash=recorded.journal_hash,
        )

    def CancelExecutionRequest(
        self, request: execution_pb2.CancelExecutionRequestRequest, context: grpc.ServicerContext
    ) -> execution_pb2.CancelExecutionRequestResponse:
        record = self._ledger.cancel_execution_request(
            request.execution_request_id, current_principal().identity, request.reason
        )
        return execution_pb2.CancelExecutionRequestResponse(
            execution_request=execution_request_to_proto(record)
        )

    def ExpireExecutionRequests(
        self, request: execution_pb2.ExpireExecutionRequestsRequest, context: grpc.ServicerContext
    ) -> execution_pb2.ExpireExecutionRequestsResponse:
        expired = self._ledger.expire_due()
        return execution_pb2.ExpireExecutionRequestsResponse(
            expired=[execution_request_to_proto(record) for record in expired]
        )

    def GetCommandUsage(
        self, request: execution_pb2.GetCommandUsageRequest, context: grpc.ServicerContext
    ) -> execution_pb2.GetCommandUsageResponse:
        used, limit = self._ledger.command_usage(request.run_id)
        return execution_pb2.GetCommandUsageResponse(
            usage=execution_pb2.CommandUsage(used=used, limit=limit)
        )
