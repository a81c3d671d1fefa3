"""The worker's port to the ledger: the public RPCs it uses, with its worker token, and nothing
else (no database, no privileged path). Every failed call becomes :class:`LedgerRefused`
carrying the ledger's typed error, so the run loop can name the reason when it stops."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, TypeVar

import grpc

from forge.continuity.v1 import (
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    ledger_pb2,
    ledger_pb2_grpc,
)
from shared.continuity.canonical import sha256_digest
from shared.contract.channels import open_channel
from shared.runtime.config import ClientTls
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
    #: The profile digest of the worker's installed code ("": none presented).
    profile_digest: str = ""


@dataclass(frozen=True)
class Claimed:
    """A claim's answer (or the read-back of one whose answer was lost) and when this process
    sent the request that carried it, on its monotonic clock: the ledger read the lease after
    that (``services.worker.stopping.measured_lease``)."""

    answer: execution_pb2.ClaimExecutionRequestResponse
    sent_at: float


def _call(rpc: str, call: Callable[[], T]) -> T:
    try:
        return call()
    except grpc.RpcError as error:
        raise LedgerRefused(rpc, from_rpc_error(error)) from None


#: The goal claims a completion entry records, by their contract names.
GOAL_CLAIMS: Final = {
    "satisfied": "GOAL_CLAIM_SATISFIED",
    "not_satisfied": "GOAL_CLAIM_NOT_SATISFIED",
    "unknown": "GOAL_CLAIM_UNKNOWN",
}
#: The answers that may have been lost after the ledger applied the write.
LOST_ANSWERS: Final = frozenset({grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE})
#: Read-backs (each followed, when the write is not there, by one more send) before the worker
#: stops naming the lost answer.
READ_BACKS: Final = 5
READ_BACK_PAUSE_SECONDS: Final = 0.5


def _lost(refused: LedgerRefused) -> bool:
    return refused.error.kind.value in LOST_ANSWERS


def write_resolving_lost_answers(
    rpc: str, send: Callable[[], T], read_back: Callable[[], T | None]
) -> T:
    """Send a write; when its answer is lost (DEADLINE_EXCEEDED, UNAVAILABLE) it may or may not
    have been applied, so it is resolved by ``read_back`` before anything is sent again: the
    write's result when it was applied (never a duplicate), else None and it is sent once more.
    A read-back whose own answer is lost is asked again, never guessed. Still unresolved after
    READ_BACKS rounds: LedgerRefused naming the lost answer (the worker stops, loudly)."""
    answer = _unless_lost(lambda: _call(rpc, send))
    for _ in range(READ_BACKS):
        if not isinstance(answer, LedgerRefused):
            return answer
        time.sleep(READ_BACK_PAUSE_SECONDS)
        found = _unless_lost(read_back)
        if isinstance(found, LedgerRefused):
            continue  # unresolved: still the write's lost answer that stops the worker
        if found is not None:
            return found
        answer = _unless_lost(lambda: _call(rpc, send))
    if isinstance(answer, LedgerRefused):
        raise answer
    return answer


def _unless_lost(call: Callable[[], T]) -> T | LedgerRefused:
    """``call``'s result, or the refusal when its answer was lost; any other refusal raises."""
    try:
        return call()
    except LedgerRefused as refused:
        if not _lost(refused):
            raise
        return refused


class LedgerPort:
    """The ledger's LedgerService and ExecutionService, as one worker identity."""

    def __init__(self, target: str, token: str, tls: ClientTls | None = None) -> None:
        self._channel = open_channel(target, token, tls=tls)
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

    def queued_everywhere(self) -> list[common_pb2.ExecutionRequest]:
        """Every queued execution request of any run that automatic scheduling may pick (none
        with an admission-refusal record), oldest first."""
        found: list[common_pb2.ExecutionRequest] = []
        token = ""
        while True:
            request = execution_pb2.ListAllExecutionRequestsRequest(
                page_size=500, page_token=token, filter="state = queued"
            )
            page = _call(
                "ListAllExecutionRequests",
                lambda: self._execution.ListAllExecutionRequests(request),  # noqa: B023
            )
            found += [r for r in page.execution_requests if not r.admission_refusal]
            token = page.next_page_token
            if not token:
                break
        return sorted(
            found,
            key=lambda r: (r.created_at.seconds, r.created_at.nanos, r.execution_request_id),
        )

    def get_execution_request(self, execution_request_id: str) -> common_pb2.ExecutionRequest:
        return self._read_request(execution_request_id).execution_request

    def _read_request(self, execution_request_id: str) -> execution_pb2.GetExecutionRequestResponse:
        request = execution_pb2.GetExecutionRequestRequest(
            execution_request_id=execution_request_id
        )
        return _call("GetExecutionRequest", lambda: self._execution.GetExecutionRequest(request))

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
    ) -> Claimed:
        """Claim in the run's attempt, presenting this worker's source, configuration and
        profile (the ledger compares them with the run's): the claimed request and its
        ``worker_claimed`` entry, and when the request that answered them was sent."""
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
            profile_digest=presented.profile_digest,
        )
        # The calls are made one after another; the answer returned is the last one's, so the
        # last send time is the one the ledger's reading of the lease came after.
        sent = [0.0]

        def timed(call: Callable[[], T]) -> T:
            sent[0] = time.monotonic()
            return call()

        response = write_resolving_lost_answers(
            "ClaimExecutionRequest",
            lambda: timed(lambda: self._execution.ClaimExecutionRequest(request)),
            lambda: timed(lambda: self._claimed_by(execution_request_id, owner)),
        )
        self._source = source
        return Claimed(response, sent[0])

    def _claimed_by(
        self, execution_request_id: str, owner: execution_pb2.OwnerInstance | None
    ) -> execution_pb2.ClaimExecutionRequestResponse | None:
        """The claim whose answer was lost, when the ledger holds it for this process: claimed,
        and its newest ``worker_claimed`` names this owner instance. None: not claimed (sent
        again; a claim by anyone else is then refused as usual)."""
        read = self._read_request(execution_request_id)
        record = read.execution_request
        if owner is None or record.state != common_pb2.EXECUTION_REQUEST_STATE_CLAIMED:
            return None
        for entry in reversed(self.journal(record.run_id)):
            payload = json.loads(entry.payload_json)
            if (
                entry.kind == common_pb2.JOURNAL_ENTRY_KIND_WORKER_CLAIMED
                and payload.get("execution_request_id") == execution_request_id
                and payload.get("lease_generation") == record.lease.generation
            ):
                mine = payload.get("owner_instance") or {}
                if mine.get("pid") == owner.pid and mine.get("host_boot_id") == owner.host_boot_id:
                    # the read's time, not the claim's: the claim came before this read
                    return execution_pb2.ClaimExecutionRequestResponse(
                        execution_request=record,
                        worker_claimed_entry=entry,
                        ledger_time=read.ledger_time if read.HasField("ledger_time") else None,
                    )
                return None
        return None

    def put_blob(self, content: bytes) -> str:
        request = ledger_pb2.PutBlobRequest(
            content=content, media_type="application/json", expected_digest=sha256_digest(content)
        )
        digest = request.expected_digest

        def stored() -> ledger_pb2.PutBlobResponse | None:
            try:
                self.blob(digest)
            except LedgerRefused as refused:
                if refused.reason == "BLOB_NOT_FOUND":
                    return None
                raise
            return ledger_pb2.PutBlobResponse(digest=digest)

        return str(
            write_resolving_lost_answers(
                "PutBlob", lambda: self._ledger.PutBlob(request), stored
            ).digest
        )

    def append(
        self,
        run_id: str,
        head: str,
        kind: common_pb2.JournalEntryKind.ValueType,
        payload: Mapping[str, object],
        head_sequence: int = 0,
    ) -> common_pb2.JournalEntry:
        """Append at ``head`` (the entry at ``head_sequence``; 0: unknown, the read-back after a
        lost answer reads the whole journal)."""
        request = ledger_pb2.AppendJournalEntryRequest(
            run_id=run_id, expected_head_hash=head, kind=kind, payload_json=json.dumps(payload)
        )

        def appended() -> ledger_pb2.AppendJournalEntryResponse | None:
            # The entry after the expected head: this one when it was applied; anything else
            # (or nothing) and it is sent again, at the same head, which the ledger refuses
            # as stale if someone else wrote meanwhile.
            after = [e for e in self.journal(run_id, head_sequence + 1) if e.prev_hash == head]
            if after and after[0].kind == kind and json.loads(after[0].payload_json) == payload:
                return ledger_pb2.AppendJournalEntryResponse(entry=after[0])
            return None

        return write_resolving_lost_answers(
            "AppendJournalEntry", lambda: self._ledger.AppendJournalEntry(request), appended
        ).entry

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
        # The command id is the idempotency key: recording it again reads back the stored
        # receipt (charged once) or, when the first never arrived, records it now.
        return write_resolving_lost_answers(
            "RecordCommand",
            lambda: self._execution.RecordCommand(request),
            lambda: _call("RecordCommand", lambda: self._execution.RecordCommand(request)),
        )

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
        return write_resolving_lost_answers(
            "CompleteExecutionRequest",
            lambda: self._execution.CompleteExecutionRequest(request),
            lambda: self._completed(claimed),
        )

    def _ended(
        self, claimed: common_pb2.ExecutionRequest, event: str
    ) -> tuple[common_pb2.ExecutionRequest, common_pb2.JournalEntry] | None:
        """The request and its ``request_event`` ``event`` under the claimed generation, when
        the ledger recorded it; None while the request is still claimed."""
        record = self.get_execution_request(claimed.execution_request_id)
        if record.state == common_pb2.EXECUTION_REQUEST_STATE_CLAIMED:
            return None
        for entry in reversed(self.journal(claimed.run_id)):
            payload = json.loads(entry.payload_json)
            if (
                entry.kind == common_pb2.JOURNAL_ENTRY_KIND_REQUEST_EVENT
                and payload.get("execution_request_id") == claimed.execution_request_id
                and payload.get("lease_generation") == claimed.lease.generation
                and payload.get("event") == event
            ):
                return record, entry
        return None  # ended otherwise (cancelled, fenced): sent again, the ledger says why

    def _completed(
        self, claimed: common_pb2.ExecutionRequest
    ) -> execution_pb2.CompleteExecutionRequestResponse | None:
        ended = self._ended(claimed, "completed")
        if ended is None:
            return None
        record, entry = ended
        payload = json.loads(entry.payload_json)
        certification = payload.get("certification") or {}
        return execution_pb2.CompleteExecutionRequestResponse(
            execution_request=record,
            goal_claim=execution_pb2.GoalClaim.Value(
                GOAL_CLAIMS.get(str(payload.get("goal_claim")), "GOAL_CLAIM_UNSPECIFIED")
            ),
            certification=execution_pb2.CompletionCertification(**certification),
            completed_rounds=int(payload.get("completed_rounds", 0)),
            journal_sequence=entry.sequence,
        )

    def fail(self, claimed: common_pb2.ExecutionRequest, reason: str) -> None:
        request = execution_pb2.FailExecutionRequestRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=claimed.lease.generation,
            reason=reason,
            source=self._source,
        )
        write_resolving_lost_answers(
            "FailExecutionRequest",
            lambda: self._execution.FailExecutionRequest(request),
            lambda: None if self._ended(claimed, "failed") is None else True,
        )
