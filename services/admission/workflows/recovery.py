"""Every one-use recovery as a workflow of the submit driver (ADR 0007, ADR 0009, ADR 0013).

One submission serves every workflow of the registry (``shared.continuity.recovery``): a
recovery request names ``(run_id, request_id)``, its caller-chosen ``recovery_id``, the exact
``candidate_digest``, a bounded ``valid_for_seconds``, the workflow's acknowledgements (each
exactly ``true``) and the inputs the workflow carries (a reviewed rejection and a corrective
provider for the rejected boundary), which join the content digest and are validated by the
workflow's descriptor. The driver validates, reads back by (run_id, request_id, workflow),
replays or refuses by the idempotency rule keyed by ``recovery_id``, recomputes the candidate
with the same inputs, compares its one digest and refuses a held candidate; the ledger's one
recovery transaction runs the admissibility check again.

One pass of proof: a workflow that continues from a new derived checkpoint (the read-only
observation) takes the checkpoint bytes and witness digest from the recomputed candidate, which
computed them; admission checks the bytes against their digest and the candidate's proof
(``RECONSTRUCTION_MISMATCH`` otherwise) and does not reconstruct again. The ledger binds them to
the journal's turn inside its transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypeVar

from google.protobuf.message import Message

from services.admission.domain import (
    HoldView,
    require_acknowledgements,
    require_digests,
    require_identifiers,
    require_window,
)
from services.admission.driver import Stored, Submitted
from shared.continuity.canonical import digest_of
from shared.continuity.derived_checkpoint import proved
from shared.continuity.recovery import INPUT_FIELDS, DerivedCheckpoint, Inputs, Workflow
from shared.runtime.errors import NotFound

OutcomeT = TypeVar("OutcomeT")
OutcomeT_co = TypeVar("OutcomeT_co", covariant=True)

#: The ledger's refusal when nothing is stored for a request and workflow.
RECOVERY_NOT_FOUND = "RECOVERY_NOT_FOUND"
#: Inputs the operator submits (the derived checkpoint comes from the candidate instead).
SUBMITTED_INPUTS = ("reviewed", "corrective")


@dataclass(frozen=True)
class RecoveryKey:
    """Where a request's recovery of one workflow is stored."""

    run_id: str
    request_id: str
    workflow: str


@dataclass(frozen=True)
class RecoveryRequest:
    """An administrator's recovery of one workflow, as submitted."""

    workflow: str
    run_id: str
    request_id: str
    recovery_id: str
    candidate_digest: str
    valid_for_seconds: int
    acknowledgements: Mapping[str, bool]
    #: The workflow's own submitted inputs (none for most workflows).
    inputs: Inputs = field(default_factory=Inputs)

    @property
    def key(self) -> RecoveryKey:
        return RecoveryKey(self.run_id, self.request_id, self.workflow)

    @property
    def action_id(self) -> str:
        return self.recovery_id

    @property
    def digests(self) -> Mapping[str, str]:
        return {"candidate_digest": self.candidate_digest}

    @property
    def content_digest(self) -> str:
        """What makes two submissions identical (the identity is compared separately). Stored
        recoveries carry it: its shape must never change. A submitted input joins it under its
        contract name."""
        submitted = {
            INPUT_FIELDS[name]: asdict(value)
            for name in SUBMITTED_INPUTS
            if (value := getattr(self.inputs, name)) is not None
        }
        return digest_of(
            {
                "workflow": self.workflow,
                "run_id": self.run_id,
                "request_id": self.request_id,
                "recovery_id": self.recovery_id,
                "candidate_digest": self.candidate_digest,
                "valid_for_seconds": self.valid_for_seconds,
                "acknowledgements": dict(self.acknowledgements),
                **submitted,
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
    #: The derived checkpoint digest the candidate's proof names ("" when it names none).
    proven_checkpoint_digest: str = ""
    #: What the commit stores that the candidate computed (None when it carries none).
    commit_inputs: DerivedCheckpoint | None = None
    #: The candidate's handoff payload, carried by a refusal of the held candidate.
    handoff: Message | None = None

    @property
    def digests(self) -> Mapping[str, str]:
        return {"candidate_digest": self.candidate_digest}


@dataclass(frozen=True)
class RecoveryCommit:
    """Everything the ledger's recovery transaction needs; it re-checks the rest itself."""

    workflow: str
    run_id: str
    request_id: str
    recovery_id: str
    actor: str
    request_content_digest: str
    candidate_digest: str
    expected_head_hash: str
    policy_revision: int
    valid_for_seconds: int
    inputs: Inputs = field(default_factory=Inputs)


class RecoveryStore(Protocol[OutcomeT_co]):
    """Where every recovery workflow reads its saved action back."""

    def stored_recovery(self, key: RecoveryKey) -> Stored[OutcomeT_co]:
        """The recovery stored under ``key``; NOT_FOUND RECOVERY_NOT_FOUND when there is none."""
        ...


class RecoveryPort(RecoveryStore[OutcomeT_co], Protocol[OutcomeT_co]):
    """What every recovery workflow needs from the candidate service and the ledger."""

    def recovery_candidate(
        self, workflow: Workflow, run_id: str, request_id: str, inputs: Inputs
    ) -> RecoveryCandidateView: ...

    def commit_recovery(self, recovery: RecoveryCommit) -> Submitted[OutcomeT_co]: ...


def find_recovery(port: RecoveryStore[OutcomeT], key: RecoveryKey) -> Stored[OutcomeT] | None:
    """The recovery stored under ``key``, or None; any other refusal travels on."""
    try:
        return port.stored_recovery(key)
    except NotFound as missing:
        if missing.reason != RECOVERY_NOT_FOUND:
            raise
        return None


class RecoverySubmission:
    """The submit driver's workflow for the recoveries of one registered workflow."""

    id_field = "recovery_id"

    def __init__(self, workflow: Workflow, port: RecoveryPort[Any]) -> None:
        self.workflow = workflow
        self._port = port

    def validate(self, request: RecoveryRequest) -> None:
        require_identifiers(
            {
                "run_id": request.run_id,
                "request_id": request.request_id,
                "recovery_id": request.recovery_id,
            }
        )
        require_acknowledgements(request.acknowledgements, self.workflow.acknowledgements)
        require_window(request.valid_for_seconds)
        require_digests({"candidate_digest": request.candidate_digest})
        self.workflow.validate(request.inputs)

    def read_back(self, request: RecoveryRequest) -> Stored[Any] | None:
        return find_recovery(self._port, request.key)

    def candidate(self, request: RecoveryRequest) -> RecoveryCandidateView:
        """The workflow's candidate, recomputed now with the submission's own inputs."""
        return self._port.recovery_candidate(
            self.workflow, request.run_id, request.request_id, request.inputs
        )

    def commit(
        self, request: RecoveryRequest, identity: str, candidate: RecoveryCandidateView
    ) -> Submitted[Any]:
        inputs = request.inputs
        if "derived" in self.workflow.inputs:
            inputs = Inputs(inputs.reviewed, inputs.corrective, derived_checkpoint(candidate))
        return self._port.commit_recovery(
            RecoveryCommit(
                workflow=self.workflow.name,
                run_id=request.run_id,
                request_id=request.request_id,
                recovery_id=request.recovery_id,
                actor=identity,
                request_content_digest=request.content_digest,
                candidate_digest=candidate.candidate_digest,
                expected_head_hash=candidate.journal_head_hash,
                policy_revision=candidate.policy_revision,
                valid_for_seconds=request.valid_for_seconds,
                inputs=inputs,
            )
        )


def derived_checkpoint(candidate: RecoveryCandidateView) -> DerivedCheckpoint:
    """The candidate's derived checkpoint, its bytes hashing to the digest its proof names."""
    return proved(candidate.commit_inputs, digest=candidate.proven_checkpoint_digest)
