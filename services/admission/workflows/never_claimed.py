"""The never-claimed failed-request recovery as a workflow of the submit driver (ADR 0007,
ADR 0009).

The driver validates, reads back by (run_id, request_id), replays or refuses by the idempotency
rule keyed by ``recovery_id``, recomputes the recovery candidate, compares its one digest and
refuses a held candidate; this workflow then asks the ledger for the one recovery transaction,
which runs the admissibility check again with the actor's authority asked again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from services.admission.domain import (
    HoldView,
    require_acknowledgements,
    require_digests,
    require_identifiers,
    require_window,
)
from services.admission.driver import Stored, Submitted
from shared.canonical import digest_of
from shared.contract import RECOVERY_ACKNOWLEDGEMENTS
from shared.errors import NotFound
from shared.rejected_boundary import ReviewedRejection
from shared.rejected_boundary_evidence import CorrectiveProvider

OutcomeT = TypeVar("OutcomeT")
OutcomeT_co = TypeVar("OutcomeT_co", covariant=True)

WORKFLOW = "never_claimed"
#: The ledger's refusal when nothing is stored for a request and workflow.
RECOVERY_NOT_FOUND = "RECOVERY_NOT_FOUND"


@dataclass(frozen=True)
class RecoveryKey:
    """Where a request's recovery of one workflow is stored."""

    run_id: str
    request_id: str
    workflow: str = WORKFLOW


@dataclass(frozen=True)
class NeverClaimedRequest:
    """An administrator's never-claimed recovery, as submitted."""

    run_id: str
    request_id: str
    recovery_id: str
    candidate_digest: str
    valid_for_seconds: int
    acknowledgements: Mapping[str, bool]

    @property
    def key(self) -> RecoveryKey:
        return RecoveryKey(self.run_id, self.request_id)

    @property
    def action_id(self) -> str:
        return self.recovery_id

    @property
    def digests(self) -> Mapping[str, str]:
        return {"candidate_digest": self.candidate_digest}

    @property
    def content_digest(self) -> str:
        """What makes two submissions identical (the identity is compared separately). Stored
        recoveries carry it: its shape must never change."""
        return digest_of(
            {
                "workflow": WORKFLOW,
                "run_id": self.run_id,
                "request_id": self.request_id,
                "recovery_id": self.recovery_id,
                "candidate_digest": self.candidate_digest,
                "valid_for_seconds": self.valid_for_seconds,
                "acknowledgements": dict(self.acknowledgements),
            }
        )


@dataclass(frozen=True)
class RecoveryCandidateView:
    """The recomputed recovery candidate, as the driver and the commit need it."""

    eligible: bool
    candidate_digest: str
    holds: tuple[HoldView, ...]
    policy_revision: int
    journal_head_hash: str

    @property
    def digests(self) -> Mapping[str, str]:
        return {"candidate_digest": self.candidate_digest}


@dataclass(frozen=True)
class RecoveryCommit:
    """Everything the ledger's recovery transaction needs; it re-checks the rest itself."""

    run_id: str
    request_id: str
    recovery_id: str
    actor: str
    request_content_digest: str
    candidate_digest: str
    expected_head_hash: str
    policy_revision: int
    valid_for_seconds: int
    workflow: str = WORKFLOW
    #: Rejected boundary only: the administrator-reviewed rejection.
    reviewed: ReviewedRejection | None = None
    #: Rejected boundary only: the corrective provider configuration.
    corrective: CorrectiveProvider | None = None


class NeverClaimedPort(Protocol[OutcomeT_co]):
    """What the workflow needs from the ledger and candidate services."""

    def stored_recovery(self, key: RecoveryKey) -> Stored[OutcomeT_co]:
        """The recovery stored under ``key``; NOT_FOUND RECOVERY_NOT_FOUND when there is none."""
        ...

    def never_claimed_candidate(self, run_id: str, request_id: str) -> RecoveryCandidateView: ...

    def commit_recovery(self, recovery: RecoveryCommit) -> Submitted[OutcomeT_co]: ...


class NeverClaimedRecovery(Generic[OutcomeT]):
    """The submit driver's workflow for the never-claimed recovery."""

    id_field = "recovery_id"

    def __init__(self, port: NeverClaimedPort[OutcomeT]) -> None:
        self._port = port

    def validate(self, request: NeverClaimedRequest) -> None:
        require_identifiers(
            {
                "run_id": request.run_id,
                "request_id": request.request_id,
                "recovery_id": request.recovery_id,
            }
        )
        require_acknowledgements(request.acknowledgements, RECOVERY_ACKNOWLEDGEMENTS[WORKFLOW])
        require_window(request.valid_for_seconds)
        require_digests({"candidate_digest": request.candidate_digest})

    def read_back(self, request: NeverClaimedRequest) -> Stored[OutcomeT] | None:
        return find_recovery(self._port, request.key)

    def candidate(self, request: NeverClaimedRequest) -> RecoveryCandidateView:
        return self._port.never_claimed_candidate(request.run_id, request.request_id)

    def commit(
        self, request: NeverClaimedRequest, identity: str, candidate: RecoveryCandidateView
    ) -> Submitted[OutcomeT]:
        return self._port.commit_recovery(
            RecoveryCommit(
                run_id=request.run_id,
                request_id=request.request_id,
                recovery_id=request.recovery_id,
                actor=identity,
                request_content_digest=request.content_digest,
                candidate_digest=candidate.candidate_digest,
                expected_head_hash=candidate.journal_head_hash,
                policy_revision=candidate.policy_revision,
                valid_for_seconds=request.valid_for_seconds,
            )
        )


class RecoveryStore(Protocol[OutcomeT_co]):
    """Where every recovery workflow reads its saved action back."""

    def stored_recovery(self, key: RecoveryKey) -> Stored[OutcomeT_co]:
        """The recovery stored under ``key``; NOT_FOUND RECOVERY_NOT_FOUND when there is none."""
        ...


def find_recovery(port: RecoveryStore[OutcomeT], key: RecoveryKey) -> Stored[OutcomeT] | None:
    """The recovery stored under ``key``, or None; any other refusal travels on."""
    try:
        return port.stored_recovery(key)
    except NotFound as missing:
        if missing.reason != RECOVERY_NOT_FOUND:
            raise
        return None
