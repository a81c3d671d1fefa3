"""The invalid-read continuity admission, versions 1 and 2, as one workflow of the submit driver.

A version differs only in contract facts (``shared.contract.terms.VERSIONS[n]``): the
acknowledgements its route requires (and, inside the candidate, the reconstruction it needs).
The workflow recomputes the candidate for the requested version, which returns with its proof the
derived checkpoint its one reconstruction produced; admission checks those bytes against the
digest the proof binds (nothing is read or reconstructed a second time) and asks the ledger for
the one atomic append. Admission never writes to the database itself; its one write is the
ledger's commit, which re-checks the derived checkpoint's digest and stores the bytes in the same
transaction as the settlement (docs/adr/0007-submit-driver.md, "Amendment").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from google.protobuf.message import Message

from services.admission.domain import (
    HoldView,
    require_acknowledgements,
    require_digests,
    require_identifiers,
    require_version,
    require_window,
)
from services.admission.driver import Stored, Submitted
from shared.continuity.canonical import digest_of
from shared.continuity.commit_admission import CommitAdmission
from shared.continuity.derived_checkpoint import DerivedCheckpoint, proved
from shared.contract.terms import DIGEST_NAMES, ContinuityVersion
from shared.runtime.errors import FailedPrecondition, NotFound

TicketT = TypeVar("TicketT")
TicketT_co = TypeVar("TicketT_co", covariant=True)

#: The ledger's refusal when nothing is stored under an admission key.
ADMISSION_NOT_FOUND = "ADMISSION_NOT_FOUND"


@dataclass(frozen=True)
class AdmissionKey:
    """Where an admission is stored: the run and the caller-chosen request id."""

    run_id: str
    request_id: str


@dataclass(frozen=True)
class ContinuityRequest:
    """An operator's admission request, as submitted (either version)."""

    run_id: str
    request_id: str
    version: int
    valid_for_seconds: int
    digests: Mapping[str, str]
    acknowledgements: Mapping[str, bool]

    @property
    def key(self) -> AdmissionKey:
        return AdmissionKey(self.run_id, self.request_id)

    @property
    def action_id(self) -> str:
        return self.request_id

    @property
    def content_digest(self) -> str:
        """What makes two submissions "identical" (the identity is compared separately).
        Stored tickets carry it: its shape must never change."""
        return digest_of(
            {
                "run_id": self.run_id,
                "request_id": self.request_id,
                "version": self.version,
                "valid_for_seconds": self.valid_for_seconds,
                "digests": dict(self.digests),
                "acknowledgements": dict(self.acknowledgements),
            }
        )


@dataclass(frozen=True)
class CandidateProof:
    """The parts of the candidate's proof the commit binds (all inside its candidate digest)."""

    consumed_response_digest: str
    derived_checkpoint_digest: str
    witness_digest: str


@dataclass(frozen=True)
class InvalidReadCandidate:
    """The recomputed invalid-read continuity candidate."""

    run_id: str
    eligible: bool
    version: int
    digests: Mapping[str, str]
    holds: tuple[HoldView, ...]
    policy_revision: int
    journal_head_hash: str
    proof: CandidateProof
    #: Returned with an eligible candidate only; None when the candidate sent none.
    derived: DerivedCheckpoint | None = None
    #: The candidate's handoff payload, carried by a refusal of the held candidate.
    handoff: Message | None = None


class InvalidReadPort(Protocol[TicketT_co]):
    """What the workflow needs from the ledger, candidate and reconstruction services."""

    def stored_ticket(self, key: AdmissionKey) -> Stored[TicketT_co]:
        """The ticket stored under ``key``; NOT_FOUND ADMISSION_NOT_FOUND when there is none."""
        ...

    def invalid_read_candidate(self, run_id: str, version: int) -> InvalidReadCandidate:
        """The candidate of ``run_id`` under ``version``, with its derived checkpoint when it is
        eligible."""
        ...

    def commit(self, admission: CommitAdmission) -> Submitted[TicketT_co]: ...


class InvalidReadContinuity(Generic[TicketT]):
    """The submit driver's workflow for one invalid-read continuity version."""

    id_field = "request_id"

    def __init__(self, version: ContinuityVersion, port: InvalidReadPort[TicketT]) -> None:
        self._version = version
        self._port = port

    def validate(self, request: ContinuityRequest) -> None:
        """INVALID_ARGUMENT naming every bad field; nothing is read or written before this."""
        require_identifiers({"run_id": request.run_id, "request_id": request.request_id})
        require_version(request.version, self._version.number)
        require_acknowledgements(request.acknowledgements, self._version.acknowledgements)
        require_window(request.valid_for_seconds)
        require_digests({f"digests.{name}": request.digests.get(name, "") for name in DIGEST_NAMES})

    def read_back(self, request: ContinuityRequest) -> Stored[TicketT] | None:
        return find_ticket(self._port, request.key)

    def candidate(self, request: ContinuityRequest) -> InvalidReadCandidate:
        return self._port.invalid_read_candidate(request.run_id, request.version)

    def commit(
        self, request: ContinuityRequest, identity: str, candidate: InvalidReadCandidate
    ) -> Submitted[TicketT]:
        if candidate.version != request.version:
            raise FailedPrecondition(
                "CANDIDATE_VERSION_MISMATCH",
                f"the candidate proves version {candidate.version}, not {request.version}",
                metadata={"candidate_version": str(candidate.version)},
            )
        derived = proved_derived_checkpoint(candidate)
        return self._port.commit(
            CommitAdmission(
                run_id=request.run_id,
                request_id=request.request_id,
                operator_identity=identity,
                request_content_digest=request.content_digest,
                expected_head_hash=candidate.journal_head_hash,
                policy_revision=candidate.policy_revision,
                digests=candidate.digests,
                version=request.version,
                valid_for_seconds=request.valid_for_seconds,
                derived_checkpoint_digest=derived.digest,
                consumed_response_digest=candidate.proof.consumed_response_digest,
                witness_digest=derived.witness_digest,
                derived_checkpoint=derived.content,
            )
        )


def proved_derived_checkpoint(candidate: InvalidReadCandidate) -> DerivedCheckpoint:
    """The derived checkpoint the candidate sent, checked against its proof (the candidate digest
    the driver compared covers the proof). The ledger re-checks the bytes inside its
    transaction."""
    proof = candidate.proof
    return proved(
        candidate.derived,
        digest=proof.derived_checkpoint_digest,
        witness_digest=proof.witness_digest,
    )


def find_ticket(port: InvalidReadPort[TicketT], key: AdmissionKey) -> Stored[TicketT] | None:
    """The ticket stored under ``key``, or None; any other refusal travels on."""
    try:
        return port.stored_ticket(key)
    except NotFound as missing:
        if missing.reason != ADMISSION_NOT_FOUND:
            raise
        return None
