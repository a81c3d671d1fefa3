"""The worker's port to the ledger: the public RPCs it uses, with its worker token, and nothing
else (no database, no privileged path). Every failed call becomes :class:`LedgerRefused`
carrying the ledger's typed error, so the run loop can name the reason when it stops."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import grpc

from forge.continuity.v1 import (
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    ledger_pb2,
    ledger_pb2_grpc,
)
from shared.continuity.canonical import sha256_digest
from shared.runtime.client import open_channel
from shared.runtime.errors import DomainError, from_rpc_error

T = TypeVar("T")


class LedgerRefused(Exception):
    """The ledger refused (or could not answer) a call; ``error`` is its typed error."""

    def __init__(self, rpc: str, error: DomainError) -> None:
        super().__init__(f"{rpc}: {error.reason}: {error.message}")
        self.rpc = rpc
        self.error = error

    @property
    def reason(self) -> str:
        return self.error.reason


@dataclass(frozen=True)
class Presented:
    """What the worker presents at claim; an empty revision or configuration: the run's."""

    source_revision: str
    configuration_digest: str
    source_profile: str


def _call(rpc: str, call: Callable[[], T]) -> T:
    try:
        return call()
    except grpc.RpcError as error:
        raise LedgerRefused(rpc, from_rpc_error(error)) from None


class LedgerPort:
    """The ledger's LedgerService and ExecutionService, as one worker identity."""

    def __init__(self, target: str, token: str) -> None:
        self._channel = open_channel(target, token)
        self._ledger = ledger_pb2_grpc.LedgerServiceStub(self._channel)
        self._execution = execution_pb2_grpc.ExecutionServiceStub(self._channel)
        # What this worker presented at its claim; every later write presents it again, so the
        # ledger re-checks the source it executes at each write (ADR 0014, rule 2b).
        self._source: execution_pb2.WorkerSource | None = None

    def close(self) -> None:
        self._channel.close()

    # --- reads ----------------------------------------------------------------------------------

    def get_run(self, run_id: str) -> ledger_pb2.GetRunResponse:
        request = ledger_pb2.GetRunRequest(run_id=run_id)
        response: ledger_pb2.GetRunResponse = _call("GetRun", lambda: self._ledger.GetRun(request))
        return response

    def queued(self, run_id: str) -> list[common_pb2.ExecutionRequest]:
        """The run's queued execution requests, oldest first."""
        request = execution_pb2.ListExecutionRequestsRequest(
            run_id=run_id, states=[common_pb2.EXECUTION_REQUEST_STATE_QUEUED]
        )
        response = _call(
            "ListExecutionRequests", lambda: self._execution.ListExecutionRequests(request)
        )
        return list(response.execution_requests)

    def get_execution_request(self, execution_request_id: str) -> common_pb2.ExecutionRequest:
        request = execution_pb2.GetExecutionRequestRequest(
            execution_request_id=execution_request_id
        )
        response = _call(
            "GetExecutionRequest", lambda: self._execution.GetExecutionRequest(request)
        )
        return response.execution_request

    def blob(self, digest: str) -> bytes:
        """A stored blob, checked against its digest."""
        request = ledger_pb2.GetBlobRequest(digest=digest)
        content = bytes(_call("GetBlob", lambda: self._ledger.GetBlob(request)).content)
        if sha256_digest(content) != digest:
            raise ValueError(f"blob {digest} does not hash to its digest")
        return content

    def journal(self, run_id: str, from_sequence: int = 1) -> list[common_pb2.JournalEntry]:
        """Every entry from ``from_sequence`` to the head."""
        entries: list[common_pb2.JournalEntry] = []
        while True:
            request = ledger_pb2.ReadJournalRequest(
                run_id=run_id, from_sequence=from_sequence, page_size=1000
            )
            page = _call("ReadJournal", lambda: self._ledger.ReadJournal(request))  # noqa: B023
            entries += page.entries
            if not page.next_sequence:
                return entries
            from_sequence = page.next_sequence

    # --- writes ---------------------------------------------------------------------------------

    def claim(
        self,
        execution_request_id: str,
        run: ledger_pb2.Run,
        presented: Presented,
        owner: execution_pb2.OwnerInstance | None,
    ) -> execution_pb2.ClaimExecutionRequestResponse:
        """Claim in the run's attempt, presenting this worker's source, configuration and
        profile (the ledger compares them with the run's): the claimed request and its
        ``worker_claimed`` entry."""
        source = execution_pb2.WorkerSource(
            attempt_id=run.attempt_id,
            source_revision=presented.source_revision or run.source_revision,
            configuration_digest=presented.configuration_digest or run.configuration_digest,
            source_profile=presented.source_profile,
        )
        request = execution_pb2.ClaimExecutionRequestRequest(
            execution_request_id=execution_request_id,
            attempt_id=source.attempt_id,
            source_revision=source.source_revision,
            configuration_digest=source.configuration_digest,
            source_profile=source.source_profile,
            owner_instance=owner,
        )
        response: execution_pb2.ClaimExecutionRequestResponse = _call(
            "ClaimExecutionRequest", lambda: self._execution.ClaimExecutionRequest(request)
        )
        self._source = source
        return response

    def put_blob(self, content: bytes) -> str:
        request = ledger_pb2.PutBlobRequest(
            content=content, media_type="application/json", expected_digest=sha256_digest(content)
        )
        return str(_call("PutBlob", lambda: self._ledger.PutBlob(request)).digest)

    def append(
        self,
        run_id: str,
        head: str,
        kind: common_pb2.JournalEntryKind.ValueType,
        payload: Mapping[str, object],
    ) -> common_pb2.JournalEntry:
        request = ledger_pb2.AppendJournalEntryRequest(
            run_id=run_id, expected_head_hash=head, kind=kind, payload_json=json.dumps(payload)
        )
        return _call("AppendJournalEntry", lambda: self._ledger.AppendJournalEntry(request)).entry

    def record_command(
        self, claimed: common_pb2.ExecutionRequest, command_id: str, command_digest: str
    ) -> execution_pb2.RecordCommandResponse:
        request = execution_pb2.RecordCommandRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=claimed.lease.generation,
            command_id=command_id,
            command_digest=command_digest,
            source=self._source,
        )
        response: execution_pb2.RecordCommandResponse = _call(
            "RecordCommand", lambda: self._execution.RecordCommand(request)
        )
        return response

    def complete(
        self,
        claimed: common_pb2.ExecutionRequest,
        goal_claim: execution_pb2.GoalClaim.ValueType,
        final_output_digest: str,
    ) -> execution_pb2.CompleteExecutionRequestResponse:
        request = execution_pb2.CompleteExecutionRequestRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=claimed.lease.generation,
            goal_claim=goal_claim,
            final_output_digest=final_output_digest,
            source=self._source,
        )
        response: execution_pb2.CompleteExecutionRequestResponse = _call(
            "CompleteExecutionRequest", lambda: self._execution.CompleteExecutionRequest(request)
        )
        return response

    def fail(self, claimed: common_pb2.ExecutionRequest, reason: str) -> None:
        request = execution_pb2.FailExecutionRequestRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=claimed.lease.generation,
            reason=reason,
            source=self._source,
        )
        _call("FailExecutionRequest", lambda: self._execution.FailExecutionRequest(request))
