"""What every one-use recovery submission shares (ADR 0007, ADR 0009).

A recovery request names ``(run_id, request_id)``, its caller-chosen ``recovery_id``, the exact
``candidate_digest``, a bounded ``valid_for_seconds`` and the workflow's acknowledgements, each
exactly ``true``. The workflow adds its own fields (a reviewed rejection, a corrective provider)
to the content digest and to validation, and says how its candidate is recomputed and what the
ledger's commit carries beyond the common part.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from services.admission.domain import (
    HoldView,
    require_acknowledgements,
    require_digests,
    require_identifiers,
    require_window,
)
from services.admission.driver import Stored, Submitted
from shared.continuity.canonical import digest_of
from shared.continuity.rejected_boundary import ReviewedRejection
from shared.continuity.rejected_boundary_evidence import CorrectiveProvider
from shared.contract.terms import RECOVERY_ACKNOWLEDGEMENTS
from shared.runtime.errors import NotFound

OutcomeT = TypeVar("OutcomeT")
OutcomeT_co = TypeVar("OutcomeT_co", covariant=True)
RequestT = TypeVar("RequestT", bound="RecoveryRequest")
CandidateT = TypeVar("CandidateT", bound="RecoveryCandidateView")

#: The ledger's refusal when nothing is stored for a request and workflow.
RECOVERY_NOT_FOUND = "RECOVERY_NOT_FOUND"


@dataclass(frozen=True)
class RecoveryKey:
    """Where a request's recovery of one workflow is stored."""

    run_id: str
    request_id: str
    workflow: str = "never_claimed"


class RecoveryRequest:
    """The submission properties every recovery request shares (a mixin over the workflow's
    frozen dataclass, which declares the fields)."""

    workflow: ClassVar[str]
    run_id: str
    request_id: str
    recovery_id: str
    candidate_digest: str
    valid_for_seconds: int
    acknowledgements: Mapping[str, bool]

    @property
    def key(self) -> RecoveryKey:
        return RecoveryKey(self.run_id, self.request_id, self.workflow)

    @property
    def action_id(self) -> str:
        return self.recovery_id

    @property
    def digests(self) -> Mapping[str, str]:
        return {"candidate_digest": self.candidate_digest}

    def content_extra(self) -> dict[str, Any]:
        """The workflow's own fields in the content digest (none by default)."""
        return {}

    @property
    def content_digest(self) -> str:
        """What makes two submissions identical (the identity is compared separately). Stored
        recoveries carry it: its shape must never change."""
        return digest_of(
            {
                "workflow": self.workflow,
                "run_id": self.run_id,
                "request_id": self.request_id,
                "recovery_id": self.recovery_id,
                "candidate_digest": self.candidate_digest,
                "valid_for_seconds": self.valid_for_seconds,
                "acknowledgements": dict(self.acknowledgements),
                **self.content_extra(),
            }
        )


@dataclass(frozen=True)
class ObservationBinding:
    """The read-only observation's reconstruction as admission recomputed it."""

    derived_checkpoint: bytes
    derived_checkpoint_digest: str
    witness_digest: str


@dataclass(frozen=True)
class RecoveryCandidateView:
    """The recomputed recovery candidate, as the driver and the commit need it."""

    eligible: bool
    candidate_digest: str
    holds: tuple[HoldView, ...]
    policy_revision: int
    journal_head_hash: str
    #: Read-only observation only: the proof admission reconstructs again from.
    observation: Any = None

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
    workflow: str = "never_claimed"
    #: Rejected boundary only: the administrator-reviewed rejection.
    reviewed: ReviewedRejection | None = None
    #: Rejected boundary only: the corrective provider configuration.
    corrective: CorrectiveProvider | None = None
    #: Read-only observation only: the reconstructed derived checkpoint and witness.
    observation: ObservationBinding | None = None


class RecoveryStore(Protocol[OutcomeT_co]):
    """Where every recovery workflow reads its saved action back."""

    def stored_recovery(self, key: RecoveryKey) -> Stored[OutcomeT_co]:
        """The recovery stored under ``key``; NOT_FOUND RECOVERY_NOT_FOUND when there is none."""
        ...


class RecoveryPort(RecoveryStore[OutcomeT_co], Protocol[OutcomeT_co]):
    """The ledger's recovery transaction, common to every workflow."""

    def commit_recovery(self, recovery: RecoveryCommit) -> Submitted[OutcomeT_co]: ...


def find_recovery(port: RecoveryStore[OutcomeT], key: RecoveryKey) -> Stored[OutcomeT] | None:
    """The recovery stored under ``key``, or None; any other refusal travels on."""
    try:
        return port.stored_recovery(key)
    except NotFound as missing:
        if missing.reason != RECOVERY_NOT_FOUND:
            raise
        return None


class RecoverySubmission(ABC, Generic[RequestT, CandidateT, OutcomeT]):
    """The submit driver's workflow for one recovery: validation, read-back and the commit's
    common part; a subclass recomputes its candidate and may add to both."""

    id_field = "recovery_id"
    workflow: ClassVar[str]

    def __init__(self, port: RecoveryPort[OutcomeT]) -> None:
        self._store = port

    def validate(self, request: RequestT) -> None:
        require_identifiers(
            {
                "run_id": request.run_id,
                "request_id": request.request_id,
                "recovery_id": request.recovery_id,
            }
        )
        require_acknowledgements(request.acknowledgements, RECOVERY_ACKNOWLEDGEMENTS[self.workflow])
        require_window(request.valid_for_seconds)
        require_digests({"candidate_digest": request.candidate_digest})
        self.validate_more(request)

    def validate_more(self, request: RequestT) -> None:
        """The workflow's own fields (none by default)."""

    def read_back(self, request: RequestT) -> Stored[OutcomeT] | None:
        return find_recovery(self._store, request.key)

    @abstractmethod
    def candidate(self, request: RequestT) -> CandidateT:
        """The workflow's candidate, recomputed now with the submission's own inputs."""

    def commit_extra(self, request: RequestT, candidate: CandidateT) -> dict[str, Any]:
        """The workflow's own fields of the commit (none by default)."""
        return {}

    def commit(
        self, request: RequestT, identity: str, candidate: CandidateT
    ) -> Submitted[OutcomeT]:
        return self._store.commit_recovery(
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
                workflow=self.workflow,
                **self.commit_extra(request, candidate),
            )
        )
