"""The candidate's read-only sources over gRPC: the ledger process (LedgerService, PolicyService,
ExecutionService) and the reconstruction service. Protobuf ↔ domain translation, and
reconstruction's combined answers remembered by content (ADR 0028); downstream refusals arrive as
the typed domain errors they carried (shared.runtime.client.call)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Final

import grpc

from forge.continuity.v1 import (
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    ledger_pb2,
    ledger_pb2_grpc,
    policy_pb2,
    policy_pb2_grpc,
    reconstruction_pb2,
    reconstruction_pb2_grpc,
)
from services.candidate.domain import (
    AnalysisAndReconstruction,
    AnalysisFinding,
    ChainVerification,
    ConsumedCall,
    Entry,
    ExecutionRecord,
    ExecutionState,
    JournalHead,
    PendingReproduction,
    PolicyRecord,
    Reconstruction,
    ResponseAnalysis,
    RunRecord,
    Snapshot,
)
from services.candidate.domain.journal import chain_verifier
from services.candidate.domain.model import build_entry
from services.candidate.snapshot_memory import SnapshotMemory
from shared.continuity.journal_chain import Verification
from shared.continuity.timeutil import from_timestamp, timestamp_text
from shared.contract.terms import VERSIONS, enum_short_name
from shared.runtime.client import call, stream
from shared.runtime.content_cache import ContentCache, content_key
from shared.runtime.errors import (
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unimplemented,
)

PAGE_SIZE: Final = 1000


def _head(head: common_pb2.JournalHead) -> JournalHead:
    return JournalHead(head.sequence, head.hash)


@functools.cache  # a handful of kinds, looked up once per entry of every snapshot
def _kind(value: int) -> str:
    try:
        return enum_short_name(common_pb2.JournalEntryKind, value).lower()
    except ValueError:
        return f"unknown_kind_{value}"


def _state(value: int) -> ExecutionState:
    """The domain state of a protobuf ExecutionRequestState (UNKNOWN for unspecified / new)."""
    try:
        return ExecutionState(enum_short_name(common_pb2.ExecutionRequestState, value).lower())
    except ValueError:
        return ExecutionState.UNKNOWN


def entry_from_proto(entry: common_pb2.JournalEntry) -> Entry:
    # positionally, in the order Entry declares its fields (a snapshot converts every entry)
    return build_entry(
        entry.run_id,
        entry.sequence,
        _kind(entry.kind),
        entry.payload_json,
        entry.prev_hash,
        entry.hash,
        entry.actor,
        timestamp_text(entry.recorded_at),
    )


def run_from_proto(run: ledger_pb2.Run) -> RunRecord:
    return RunRecord(
        run_id=run.run_id,
        task_id=run.task_id,
        attempt_id=run.attempt_id,
        source_revision=run.source_revision,
        configuration_digest=run.configuration_digest,
        provider_timeout_seconds=run.provider_timeout_seconds,
        active_deadline=(
            from_timestamp(run.active_deadline) if run.HasField("active_deadline") else None
        ),
        command_limit=run.command_limit,
        time_budget_protocol=run.time_budget_protocol,
        source_profile=run.source_profile,
        run_digest=run.run_digest,
    )


def _findings(holds: Sequence[reconstruction_pb2.AnalysisHold]) -> tuple[AnalysisFinding, ...]:
    return tuple(AnalysisFinding(h.reason, h.element, h.message) for h in holds)


def _analysis(found: reconstruction_pb2.AnalyzeConsumedResponseResponse) -> ResponseAnalysis:
    return ResponseAnalysis(
        tool_calls=tuple(
            ConsumedCall(c.call_id, c.tool_name, c.grant, c.args_digest) for c in found.tool_calls
        ),
        evidence_call_id=found.evidence_call_id,
        evidence_query_json=found.evidence_query_json,
        accepted_by_advertised_schema=found.accepted_by_advertised_schema,
        rejected_by_pinned_validator=found.rejected_by_pinned_validator,
        validator_error=found.validator_error,
        runtime_identity_json=found.runtime_identity_json,
        validator_identity=found.validator_identity,
        common_holds=_findings(found.common_holds),
        v1_holds=_findings(found.v1_holds),
        v2_holds=_findings(found.v2_holds),
    )


def _reconstruction(found: reconstruction_pb2.ReconstructInvalidReadResponse) -> Reconstruction:
    return Reconstruction(
        found.derived_checkpoint_digest, found.witness_digest, found.derived_checkpoint
    )


def _refusal(
    found: reconstruction_pb2.ReconstructionRefusal,
) -> FailedPrecondition | InvalidArgument:
    """The typed error ReconstructInvalidRead would have raised (as ``shared.runtime.client.call``
    rebuilds it from the status)."""
    kind = (
        InvalidArgument
        if found.code == reconstruction_pb2.RECONSTRUCTION_REFUSAL_CODE_INVALID_ARGUMENT
        else FailedPrecondition
    )
    return kind(found.reason, found.message, metadata=dict(found.metadata))


def _verification(result: ledger_pb2.VerifyJournalResponse) -> ChainVerification:
    return ChainVerification(
        valid=result.valid,
        first_broken_sequence=result.first_broken_sequence,
        problem=result.problem,
        head=_head(result.head),
    )


def _policy(policy: common_pb2.Policy) -> PolicyRecord:
    return PolicyRecord(
        revision=policy.revision,
        enabled=policy.enabled,
        digest=policy.digest,
        allow_unavailable_source_observations=policy.allow_unavailable_source_observations,
        allow_pre_admission_recovery=policy.allow_pre_admission_recovery,
        allow_readonly_observation_recovery=policy.allow_readonly_observation_recovery,
    )


def _snapshot(
    header: ledger_pb2.RunSnapshotHeader,
    entries: Sequence[Entry],
    blobs: Mapping[str, bytes],
    verification: ChainVerification,
    recomputed: Verification,
) -> Snapshot:
    return Snapshot(
        run=run_from_proto(header.run),
        head=_head(header.head),
        entries=tuple(entries),
        verification=verification,
        policy=_policy(header.policy),
        executions=tuple(_execution(r) for r in header.execution_requests),
        blobs=blobs,
        recomputed=recomputed,
    )


def _execution(record: common_pb2.ExecutionRequest) -> ExecutionRecord:
    return ExecutionRecord(
        execution_request_id=record.execution_request_id,
        request_id=record.request_id,
        state=_state(record.state),
        checkpoint_digest=record.checkpoint_digest,
    )


class GrpcCandidateSources:
    """:class:`services.candidate.domain.CandidateSources` over the ledger and reconstruction.

    Reconstruction's combined answers are remembered by the content they were computed from
    (``answers``; ADR 0028): reconstruction is a pure function of those bytes, so the admission's
    candidate, computed just after the operator's read of the same run, asks it nothing."""

    def __init__(
        self,
        ledger: grpc.Channel,
        reconstruction: grpc.Channel,
        *,
        answers: ContentCache[AnalysisAndReconstruction] | None = None,
        journals: SnapshotMemory | None = None,
    ) -> None:
        self._ledger = ledger_pb2_grpc.LedgerServiceStub(ledger)
        self._policy = policy_pb2_grpc.PolicyServiceStub(ledger)
        self._execution = execution_pb2_grpc.ExecutionServiceStub(ledger)
        self._reconstruction = reconstruction_pb2_grpc.ReconstructionServiceStub(reconstruction)
        self.answers = answers if answers is not None else ContentCache()
        self.journals = journals if journals is not None else SnapshotMemory()

    def run(self, run_id: str) -> tuple[RunRecord, JournalHead]:
        found = call(self._ledger.GetRun, ledger_pb2.GetRunRequest(run_id=run_id))
        return run_from_proto(found.run), _head(found.head)

    def journal(self, run_id: str) -> tuple[list[Entry], JournalHead]:
        entries: list[Entry] = []
        next_sequence = 1
        while True:
            page = call(
                self._ledger.ReadJournal,
                ledger_pb2.ReadJournalRequest(
                    run_id=run_id, from_sequence=next_sequence, page_size=PAGE_SIZE
                ),
            )
            entries += [entry_from_proto(e) for e in page.entries]
            if page.next_sequence == 0 or not page.entries:
                return entries, _head(page.head)
            next_sequence = page.next_sequence

    def verify(self, run_id: str) -> ChainVerification:
        return _verification(
            call(self._ledger.VerifyJournal, ledger_pb2.VerifyJournalRequest(run_id=run_id))
        )

    def policy(self) -> PolicyRecord:
        return _policy(call(self._policy.GetPolicy, policy_pb2.GetPolicyRequest()).policy)

    def execution_requests(self, run_id: str) -> list[ExecutionRecord]:
        found = call(
            self._execution.ListExecutionRequests,
            execution_pb2.ListExecutionRequestsRequest(run_id=run_id),
        )
        return [_execution(r) for r in found.execution_requests]

    def snapshot(self, run_id: str, *, closure_blobs: bool = False) -> Snapshot:
        """The run's snapshot in one ``GetRunSnapshot`` message. Streamed with
        ``ReadRunSnapshot`` instead when that is refused RESOURCE_EXHAUSTED (the ledger's
        RUN_SNAPSHOT_TOO_LARGE, or a message over either end's FORGE_MAX_MESSAGE_BYTES, which
        the stream's smaller messages may fit) or UNIMPLEMENTED (a ledger from before the RPC,
        during a rolling upgrade). Either way one database snapshot, verified by the ledger and
        recomputed here. A journal this service read before and still holds is not sent again
        while its head is the run's (``SnapshotMemory``, ADR 0030)."""
        known = self.journals.known(run_id, closure_blobs)
        request = ledger_pb2.GetRunSnapshotRequest(
            run_id=run_id, include_closure_blobs=closure_blobs
        )
        if known is not None:
            request.known_head.sequence = known.head.sequence
            request.known_head.hash = known.head.hash
        try:
            whole = call(self._ledger.GetRunSnapshot, request)
        except (ResourceExhausted, Unimplemented):
            return self._streamed_snapshot(run_id, closure_blobs=closure_blobs)
        if whole.journal_unchanged:
            if known is None or _head(whole.header.head) != known.head:
                # The ledger leaves the journal out only for the head it was sent.
                raise Internal(
                    "INTERNAL_ERROR", f"the ledger's snapshot of {run_id} left out a journal"
                )
            self.journals.counted(hit=True)
            journal = ledger_pb2.GetRunSnapshotResponse.FromString(known.journal)
            return _snapshot(
                whole.header,  # read now; the journal's own header is the earlier one's
                [entry_from_proto(e) for e in journal.entries],
                {blob.digest: blob.content for blob in journal.blobs} if closure_blobs else {},
                _verification(journal.verification),
                known.recomputed,
            )
        self.journals.counted(hit=False)
        entries = [entry_from_proto(e) for e in whole.entries]
        recomputation = chain_verifier()
        recomputation.add_all(entries)
        snapshot = _snapshot(
            whole.header,
            entries,
            {blob.digest: blob.content for blob in whole.blobs},
            _verification(whole.verification),
            recomputation.result(),
        )
        self.journals.remember(
            run_id, snapshot, whole.SerializeToString(), with_blobs=closure_blobs
        )
        return snapshot

    def _streamed_snapshot(self, run_id: str, *, closure_blobs: bool) -> Snapshot:
        """One ``ReadRunSnapshot`` stream: header, journal batches, the closure's blobs when
        asked for (a ledger that does not send them leaves the reader to GetBlob), the ledger's
        verification."""
        header: ledger_pb2.RunSnapshotHeader | None = None
        entries: list[Entry] = []
        blobs: dict[str, bytes] = {}
        verification: ChainVerification | None = None
        # The chain is recomputed batch by batch as the stream arrives: on two cores it runs
        # while the ledger reads, verifies and sends the next batch, not after the last.
        recomputation = chain_verifier()
        for part in stream(
            self._ledger.ReadRunSnapshot,
            ledger_pb2.ReadRunSnapshotRequest(run_id=run_id, include_closure_blobs=closure_blobs),
        ):
            which = part.WhichOneof("part")
            if which == "header":
                header = part.header
            elif which == "entries":
                batch = [entry_from_proto(e) for e in part.entries.entries]
                recomputation.add_all(batch)
                entries += batch
            elif which == "blob":
                blobs[part.blob.digest] = part.blob.content
            elif which == "verification":
                verification = _verification(part.verification)
        if header is None or verification is None:
            # The ledger always sends both; a stream without them broke an invariant.
            raise Internal("INTERNAL_ERROR", f"the ledger's snapshot of {run_id} ended early")
        return _snapshot(header, entries, blobs, verification, recomputation.result())

    def blob(self, digest: str) -> bytes | None:
        try:
            found = call(self._ledger.GetBlob, ledger_pb2.GetBlobRequest(digest=digest))
        except (NotFound, InvalidArgument):
            return None
        content: bytes = found.content
        return content

    def analyze(self, checkpoint: bytes, raw_response: bytes) -> ResponseAnalysis:
        return _analysis(
            call(
                self._reconstruction.AnalyzeConsumedResponse,
                reconstruction_pb2.AnalyzeConsumedResponseRequest(
                    checkpoint=checkpoint, raw_response=raw_response
                ),
            )
        )

    def reconstruct(
        self, checkpoint: bytes, raw_response: bytes, version: int, consumed_at: str
    ) -> Reconstruction:
        return _reconstruction(
            call(
                self._reconstruction.ReconstructInvalidRead,
                reconstruction_pb2.ReconstructInvalidReadRequest(
                    checkpoint=checkpoint,
                    raw_response=raw_response,
                    version=VERSIONS[version].reconstruction_version,  # type: ignore[arg-type]
                    consumed_at=consumed_at,
                ),
            )
        )

    def analyze_and_reconstruct(
        self, checkpoint: bytes, raw_response: bytes, version: int, consumed_at: str
    ) -> AnalysisAndReconstruction:
        """One ``AnalyzeAndReconstructInvalidRead`` call instead of the two above, or its answer
        to the same bytes, version and consumption time, remembered (an answer that carries a
        reconstruction refusal is asked for again, as reconstruction recomputes refusals)."""
        reconstruction_version = VERSIONS[version].reconstruction_version
        return self.answers.get_or_compute(
            content_key(checkpoint, raw_response, reconstruction_version, consumed_at),
            lambda: self._analyze_and_reconstruct(
                checkpoint, raw_response, reconstruction_version, consumed_at
            ),
            remember=lambda answer: answer.reconstruction_refusal is None,
        )

    def _analyze_and_reconstruct(
        self, checkpoint: bytes, raw_response: bytes, reconstruction_version: int, consumed_at: str
    ) -> AnalysisAndReconstruction:
        found = call(
            self._reconstruction.AnalyzeAndReconstructInvalidRead,
            reconstruction_pb2.AnalyzeAndReconstructInvalidReadRequest(
                checkpoint=checkpoint,
                raw_response=raw_response,
                version=reconstruction_version,  # type: ignore[arg-type]
                consumed_at=consumed_at,
            ),
        )
        outcome = found.WhichOneof("reconstruction_outcome")
        return AnalysisAndReconstruction(
            analysis=_analysis(found.analysis),
            reconstruction=(
                _reconstruction(found.reconstruction) if outcome == "reconstruction" else None
            ),
            reconstruction_refusal=(
                _refusal(found.reconstruction_refusal)
                if outcome == "reconstruction_refusal"
                else None
            ),
        )

    def reconstruct_observation(
        self,
        derived_checkpoint: bytes,
        raw_response: bytes,
        consumed_at: str,
        retained_results: Mapping[str, str],
    ) -> Reconstruction:
        found = call(
            self._reconstruction.ReconstructReadonlyObservation,
            reconstruction_pb2.ReconstructReadonlyObservationRequest(
                derived_checkpoint=derived_checkpoint,
                raw_response=raw_response,
                consumed_at=consumed_at,
                retained_results=[
                    reconstruction_pb2.RetainedToolResult(call_id=call_id, result_json=result)
                    for call_id, result in sorted(retained_results.items())
                ],
            ),
        )
        # the bytes travel on: admission commits them without reconstructing again
        return Reconstruction(
            found.derived_checkpoint_digest, found.witness_digest, found.derived_checkpoint
        )

    def reproduce_pending(self, derived_checkpoint: bytes) -> PendingReproduction:
        found = call(
            self._reconstruction.ReproducePendingRequest,
            reconstruction_pb2.ReproducePendingRequestRequest(
                derived_checkpoint=derived_checkpoint
            ),
        )
        return PendingReproduction(
            derived_checkpoint_digest=found.derived_checkpoint_digest,
            model=found.model,
            wire_digest=found.wire_digest,
            wire_length=found.wire_length,
            part_digests={
                "history": found.history_digest,
                "model_settings": found.model_settings_digest,
                "tool_definitions": found.tool_definitions_digest,
                "request_parameters": found.request_parameters_digest,
                "usage": found.usage_digest,
                "limits": found.limits_digest,
            },
            reproduction_digest=found.reproduction_digest,
        )
