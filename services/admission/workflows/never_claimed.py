"""The never-claimed failed-request recovery as a workflow of the submit driver (ADR 0007,
ADR 0009).

The driver validates, reads back by (run_id, request_id), replays or refuses by the idempotency
rule keyed by ``recovery_id``, recomputes the recovery candidate, compares its one digest and
refuses a held candidate; this workflow then asks the ledger for the one recovery transaction,
which runs the admissibility check again with the actor's authority asked again. What every
recovery submission shares lives in ``recovery_base``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Protocol, TypeVar

from services.admission.workflows.recovery_base import (
    RECOVERY_NOT_FOUND,
    RecoveryCandidateView,
    RecoveryCommit,
    RecoveryKey,
    RecoveryPort,
    RecoveryRequest,
    RecoveryStore,
    RecoverySubmission,
    find_recovery,
)

OutcomeT = TypeVar("OutcomeT")
OutcomeT_co = TypeVar("OutcomeT_co", covariant=True)

WORKFLOW = "never_claimed"

__all__ = [
    "RECOVERY_NOT_FOUND",
    "WORKFLOW",
    "NeverClaimedPort",
    "NeverClaimedRecovery",
    "NeverClaimedRequest",
    "RecoveryCandidateView",
    "RecoveryCommit",
    "RecoveryKey",
    "RecoveryStore",
    "find_recovery",
]


@dataclass(frozen=True)
class NeverClaimedRequest(RecoveryRequest):
    """An administrator's never-claimed recovery, as submitted."""

    workflow: ClassVar[str] = WORKFLOW
    run_id: str
    request_id: str
    recovery_id: str
    candidate_digest: str
    valid_for_seconds: int
    acknowledgements: Mapping[str, bool]


class NeverClaimedPort(RecoveryPort[OutcomeT_co], Protocol[OutcomeT_co]):
    """What the workflow needs from the ledger and candidate services."""

    def never_claimed_candidate(self, run_id: str, request_id: str) -> RecoveryCandidateView: ...


class NeverClaimedRecovery(
    RecoverySubmission[NeverClaimedRequest, RecoveryCandidateView, OutcomeT]
):
    """The submit driver's workflow for the never-claimed recovery."""

    workflow = WORKFLOW

    def __init__(self, port: NeverClaimedPort[OutcomeT]) -> None:
        super().__init__(port)
        self._port = port

    def candidate(self, request: NeverClaimedRequest) -> RecoveryCandidateView:
        return self._port.never_claimed_candidate(request.run_id, request.request_id)
