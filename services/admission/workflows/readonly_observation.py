"""The read-only observation recovery (a consumed turn with an unavailable evidence observation)
as a workflow of the submit driver (ADR 0007, ADR 0009).

Like the other recoveries (``recovery_base``): validate (four acknowledgements, each exactly
``true``), read back, replay or refuse by ``recovery_id``, recompute the candidate, compare its
digest, refuse a held candidate. Before the commit admission reconstructs the consumed turn again
from the stored bytes the candidate's proof names, through reconstruction's sealed SDK path, and
requires the derived checkpoint the candidate proved (``RECONSTRUCTION_MISMATCH`` otherwise); the
ledger stores it inside its one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

from services.admission.workflows.recovery_base import (
    ObservationBinding,
    RecoveryCandidateView,
    RecoveryPort,
    RecoveryRequest,
    RecoverySubmission,
)
from shared.continuity.readonly_observation import READONLY_OBSERVATION
from shared.runtime.errors import FailedPrecondition

OutcomeT = TypeVar("OutcomeT")
OutcomeT_co = TypeVar("OutcomeT_co", covariant=True)


@dataclass(frozen=True)
class ObservationProofView:
    """The candidate's proof: the stored bytes it reconstructed from and the result."""

    pending_checkpoint_digest: str
    consumed_response_digest: str
    consumed_at: str
    retained_result_digests: Mapping[str, str]
    derived_checkpoint_digest: str
    witness_digest: str


@dataclass(frozen=True)
class ReadonlyObservationRequest(RecoveryRequest):
    """An administrator's read-only observation recovery (ReadonlyObservationRecoveryInputV1)."""

    workflow: ClassVar[str] = READONLY_OBSERVATION
    run_id: str
    request_id: str
    recovery_id: str
    candidate_digest: str
    valid_for_seconds: int
    acknowledgements: Mapping[str, bool]


class ReadonlyObservationPort(RecoveryPort[OutcomeT_co], Protocol[OutcomeT_co]):
    """What the workflow needs from the ledger, candidate and reconstruction services."""

    def readonly_observation_candidate(
        self, run_id: str, request_id: str
    ) -> RecoveryCandidateView: ...

    def blob(self, digest: str) -> bytes: ...

    def reconstruct_observation(
        self,
        derived_checkpoint: bytes,
        raw_response: bytes,
        consumed_at: str,
        retained_results: Mapping[str, str],
    ) -> ObservationBinding: ...


class ReadonlyObservationRecovery(
    RecoverySubmission[ReadonlyObservationRequest, RecoveryCandidateView, OutcomeT]
):
    """The submit driver's workflow for the read-only observation recovery."""

    workflow = READONLY_OBSERVATION

    def __init__(self, port: ReadonlyObservationPort[OutcomeT]) -> None:
        super().__init__(port)
        self._port = port

    def candidate(self, request: ReadonlyObservationRequest) -> RecoveryCandidateView:
        return self._port.readonly_observation_candidate(request.run_id, request.request_id)

    def commit_extra(
        self, request: ReadonlyObservationRequest, candidate: RecoveryCandidateView
    ) -> dict[str, Any]:
        proof = candidate.observation
        if not isinstance(proof, ObservationProofView) or not proof.derived_checkpoint_digest:
            raise FailedPrecondition(
                "RECONSTRUCTION_MISMATCH",
                "the eligible candidate carries no reconstructed checkpoint",
                metadata={"candidate": "", "reconstructed": ""},
            )
        derived = self._port.reconstruct_observation(
            self._port.blob(proof.pending_checkpoint_digest),
            self._port.blob(proof.consumed_response_digest),
            proof.consumed_at,
            {
                call_id: self._port.blob(digest).decode("utf-8")
                for call_id, digest in sorted(proof.retained_result_digests.items())
            },
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
        return {"observation": derived}
