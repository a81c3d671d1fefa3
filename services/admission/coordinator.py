"""The admission path: validate, read back, recompute the candidate, compare digests,
reconstruct, and ask the ledger for the one atomic append. Admission never writes to the
database itself; its one write is the ledger's CommitAdmission, which stores the derived
checkpoint in the same transaction as the settlement."""

from __future__ import annotations

from dataclasses import dataclass

from forge.continuity.v1 import (
    candidate_pb2,
    candidate_pb2_grpc,
    common_pb2,
    ledger_pb2,
    ledger_pb2_grpc,
    reconstruction_pb2,
    reconstruction_pb2_grpc,
)
from services.admission.domain import (
    DIGEST_NAMES,
    ContinuityRequest,
    HoldView,
    check_replay,
    compare_digests,
    refuse_held,
)
from shared.canonical import parse_json
from shared.client import call
from shared.errors import DomainError, FailedPrecondition, NotFound

RECONSTRUCTION_VERSIONS = {
    1: reconstruction_pb2.RECONSTRUCTION_VERSION_V1,
    2: reconstruction_pb2.RECONSTRUCTION_VERSION_V2,
}


@dataclass(frozen=True)
class Downstream:
    """The stubs admission coordinates (each channel carries admission's service identity)."""

    ledger: ledger_pb2_grpc.LedgerServiceStub
    candidate: candidate_pb2_grpc.CandidateServiceStub
    reconstruction: reconstruction_pb2_grpc.ReconstructionServiceStub


class AdmissionCoordinator:
    def __init__(self, downstream: Downstream) -> None:
        self._down = downstream

    def read_back(self, run_id: str, request_id: str) -> ledger_pb2.AdmissionTicket:
        response = call(
            self._down.ledger.GetAdmission,
            ledger_pb2.GetAdmissionRequest(run_id=run_id, request_id=request_id),
        )
        ticket: ledger_pb2.AdmissionTicket = response.ticket
        return ticket

    def _stored(self, request: ContinuityRequest) -> ledger_pb2.AdmissionTicket | None:
        try:
            return self.read_back(request.run_id, request.request_id)
        except NotFound as missing:
            if missing.reason != "ADMISSION_NOT_FOUND":
                raise
            return None

    def submit(
        self, request: ContinuityRequest, operator: str
    ) -> tuple[ledger_pb2.AdmissionTicket, bool]:
        """Admit ``request`` for ``operator``; an identical repeat returns the stored ticket."""
        request.validate()
        stored = self._stored(request)
        if stored is not None:
            check_replay(request, stored.operator_identity, stored.request_content_digest, operator)
            return stored, False
        try:
            return self._admit(request, operator)
        except DomainError:
            # An identical request may have committed while this one was in flight: the
            # candidate then moved, but the right answer is still the stored ticket.
            stored = self._stored(request)
            if stored is None:
                raise
            check_replay(request, stored.operator_identity, stored.request_content_digest, operator)
            return stored, False

    def _admit(
        self, request: ContinuityRequest, operator: str
    ) -> tuple[ledger_pb2.AdmissionTicket, bool]:
        candidate = call(
            self._down.candidate.GetInvalidReadContinuityCandidate,
            candidate_pb2.GetInvalidReadContinuityCandidateRequest(
                run_id=request.run_id, version=request.version
            ),
        ).candidate
        compare_digests(
            request.digests, {name: getattr(candidate.digests, name) for name in DIGEST_NAMES}
        )
        if not candidate.eligible:
            raise refuse_held(
                [
                    HoldView(
                        common_pb2.HoldReason.Name(hold.reason).removeprefix("HOLD_REASON_"),
                        common_pb2.HoldRequirement.Name(hold.requirement).removeprefix(
                            "HOLD_REQUIREMENT_"
                        ),
                        hold.subject,
                        hold.detail,
                    )
                    for hold in candidate.holds
                ]
            )
        if candidate.version != request.version:
            raise FailedPrecondition(
                "CANDIDATE_VERSION_MISMATCH",
                f"the candidate proves version {candidate.version}, not {request.version}",
                metadata={"candidate_version": str(candidate.version)},
            )
        derived = self._reconstruct(candidate, request.version)
        committed = call(
            self._down.ledger.CommitAdmission,
            ledger_pb2.CommitAdmissionRequest(
                run_id=request.run_id,
                request_id=request.request_id,
                operator_identity=operator,
                request_content_digest=request.content_digest,
                expected_head_hash=candidate.journal_head.hash,
                policy_revision=candidate.policy_revision,
                digests=candidate.digests,
                version=request.version,
                valid_for_seconds=request.valid_for_seconds,
                derived_checkpoint_digest=derived.derived_checkpoint_digest,
                consumed_response_digest=candidate.proof.consumed_response_digest,
                witness_digest=derived.witness_digest,
                derived_checkpoint=derived.derived_checkpoint,
            ),
        )
        return committed.ticket, committed.created

    def _reconstruct(
        self, candidate: candidate_pb2.InvalidReadContinuityCandidate, version: int
    ) -> reconstruction_pb2.ReconstructInvalidReadResponse:
        """Rebuild the derived checkpoint from the stored bytes; it must be the one the
        candidate proved."""
        proof = candidate.proof
        checkpoint = self._blob(proof.checkpoint_digest)
        response = self._blob(proof.consumed_response_digest)
        consume = call(
            self._down.ledger.ReadJournal,
            ledger_pb2.ReadJournalRequest(
                run_id=candidate.run_id, from_sequence=proof.consume_sequence, page_size=1
            ),
        ).entries
        payload = parse_json(consume[0].payload_json) if consume else {}
        consumed_at = payload.get("consumed_at", "") if isinstance(payload, dict) else ""
        derived: reconstruction_pb2.ReconstructInvalidReadResponse = call(
            self._down.reconstruction.ReconstructInvalidRead,
            reconstruction_pb2.ReconstructInvalidReadRequest(
                checkpoint=checkpoint,
                raw_response=response,
                version=RECONSTRUCTION_VERSIONS[version],
                consumed_at=str(consumed_at),
            ),
        )
        if derived.derived_checkpoint_digest != proof.derived_checkpoint_digest:
            raise FailedPrecondition(
                "RECONSTRUCTION_MISMATCH",
                "the reconstructed checkpoint differs from the one the candidate proved",
                metadata={
                    "candidate": proof.derived_checkpoint_digest,
                    "reconstructed": derived.derived_checkpoint_digest,
                },
            )
        return derived

    def _blob(self, digest: str) -> bytes:
        content: bytes = call(
            self._down.ledger.GetBlob, ledger_pb2.GetBlobRequest(digest=digest)
        ).content
        return content
