"""The recovery-workflow descriptor: everything the services need to know about one workflow
(docs/adr/0013-recovery-workflow-registry.md).

A :class:`Workflow` names its contract identity (stored name, ``RecoveryWorkflow`` number, the
permitted action, the acknowledgements, the RPCs that serve it), who may act (the roles, the
policy switch) and what its evidence proves. Its methods take plain facts only — journal rows,
the request's history, the submission's inputs, a blob reader — never a service's own types, so
the candidate service and the ledger's commit transaction ask the same descriptor the same
question without importing each other. A workflow that proves what the never-claimed recovery
proves needs no method of its own; the others override what their evidence adds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from shared.continuity.admissibility_facts import ActionFacts, Situation
from shared.continuity.derived_checkpoint import DerivedCheckpoint
from shared.continuity.recovery.rejected_boundary.custody import ReviewedRejection
from shared.continuity.recovery.rejected_boundary.evidence import CorrectiveProvider
from shared.continuity.request_history import JournalRow, RequestHistory, never_claimed_facts
from shared.runtime.auth import ANY_ROLE, Role
from shared.runtime.errors import FieldViolation

#: A blob's bytes by digest, or None when nothing is stored under it.
ContentOf = Callable[[str], bytes | None]

#: The witness kinds a recovery may append (each names its workflow in its payload).
RECOVERY_WITNESS = "recovery_witness"


class PolicyLike(Protocol):
    """The policy settings a workflow's switch is read from (the ledger's and the candidate's
    both fit)."""

    @property
    def enabled(self) -> bool: ...


@dataclass(frozen=True)
class Rpc:
    """One RPC of a workflow. A workflow the contract declares names only the method; the
    message types of a method the service does not declare (a test-only workflow) are named in
    full."""

    name: str
    request_type: str = ""
    response_type: str = ""


@dataclass(frozen=True)
class Rpcs:
    """The workflow's public surface: its candidate (CandidateService), its submission and its
    read-back (AdmissionService)."""

    candidate: Rpc
    submit: Rpc
    read: Rpc

    def roles(self) -> dict[str, frozenset[Role]]:
        """Who may call each RPC, by name. The contract declares these for a declared workflow
        (``allowed_roles``; a test keeps the two equal); a workflow outside the contract is
        served with these."""
        return {
            # Admission recomputes the candidate under its own service identity.
            self.candidate.name: frozenset({Role.FACTORY_ADMINISTRATOR, Role.ADMISSION_SERVICE}),
            self.submit.name: frozenset({Role.FACTORY_ADMINISTRATOR}),
            self.read.name: ANY_ROLE,
        }


@dataclass(frozen=True)
class Inputs:
    """What a recovery carries beyond the fields every recovery shares. A workflow names the
    ones it requires (:attr:`Workflow.inputs`); the others must be absent."""

    #: The administrator-reviewed provider rejection.
    reviewed: ReviewedRejection | None = None
    #: The corrective provider configuration the request is sent under next.
    corrective: CorrectiveProvider | None = None
    #: The derived checkpoint the candidate computed and the commit stores.
    derived: DerivedCheckpoint | None = None


#: Each input's field name in the contract (for refusals).
INPUT_FIELDS: Mapping[str, str] = {
    "reviewed": "reviewed_rejection",
    "corrective": "corrective_provider",
    "derived": "derived_checkpoint",
}


@dataclass(frozen=True)
class Applies:
    """When the workflow applies, as facts a reader of the ticket sees without asking the
    candidate: whether the request failed under a worker claim, and which workflows' saved
    recoveries of the same request must come first. The candidate still decides eligibility;
    this only says which candidate is worth reading (the registry's answer, the console)."""

    #: The request failed after a worker claimed it (True) or before any claim (False).
    claimed: bool = False
    #: The stored names of the workflows whose saved recovery of the request precedes this one.
    follows: tuple[str, ...] = ()


@dataclass(frozen=True)
class Wording:
    """What an operator reads about the workflow: the registry's answer (ListRecoveryWorkflows)
    carries it to the console and the CLI, so neither keeps its own copy."""

    #: A human title (a heading).
    heading: str = ""
    #: When the workflow applies, in one sentence.
    situation: str = ""
    #: The review's name: the control that opens it and its heading.
    review: str = ""
    #: What the review records, and what it does not.
    note: str = ""
    #: (acknowledgement field, the sentence an operator accepts), in contract order.
    acknowledgements: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Evidence:
    """The native evidence a workflow judges, as plain facts."""

    rows: tuple[JournalRow, ...]
    history: RequestHistory
    #: The run's registered source revision.
    source_revision: str
    #: The checkpoint the bound execution request resumes from now.
    pending_checkpoint_digest: str
    inputs: Inputs = field(default_factory=Inputs)


@dataclass(frozen=True)
class Workflow:
    """One recovery workflow. Subclass to add what the workflow's evidence proves."""

    #: The stored name (recovery rows, witness payloads, the candidate digest).
    name: str
    #: The contract's ``RecoveryWorkflow`` value.
    number: int
    #: The permitted next action's name when admissible.
    action: str
    #: The submission's acknowledgement fields, each exactly true, in contract order.
    acknowledgements: tuple[str, ...]
    #: The roles the ticket's original operator must hold now (candidate, commit, claim).
    roles: frozenset[str]
    rpcs: Rpcs
    #: The policy setting that must enable the workflow beside ``enabled`` (None: none).
    policy_switch: str | None = None
    #: The :class:`Inputs` the workflow requires (all others must be absent).
    inputs: frozenset[str] = frozenset()
    #: The journal kind of its witness.
    witness_kind: str = RECOVERY_WITNESS
    #: The journal kind of a settlement appended before the witness ("" for none).
    settlement_kind: str = ""
    #: Words for the refusals.
    title: str = ""
    #: When the workflow applies (the default: a failure before any claim).
    applies: Applies = Applies()
    #: What an operator reads about it.
    wording: Wording = Wording()

    def __post_init__(self) -> None:
        worded = tuple(name for name, _ in self.wording.acknowledgements)
        if worded and worded != self.acknowledgements:
            raise ValueError(f"{self.name}: the wording names other acknowledgements")

    # --- who may act ----------------------------------------------------------------------

    def enabled(self, policy: PolicyLike) -> bool:
        """The policy enables recovery at all, and this workflow's own switch."""
        return bool(policy.enabled) and (
            self.policy_switch is None or bool(getattr(policy, self.policy_switch))
        )

    def input_violations(self, inputs: Inputs) -> list[FieldViolation]:
        """The workflow carries exactly its own inputs."""
        found: list[FieldViolation] = []
        for name, contract_field in INPUT_FIELDS.items():
            if (name in self.inputs) != (getattr(inputs, name) is not None):
                found.append(
                    FieldViolation(contract_field, f"required by (only) {self.describe()}")
                )
        if inputs.derived is not None:
            found += inputs.derived.violations()
        return found

    def validate(self, inputs: Inputs) -> None:
        """The workflow's own inputs are well formed (INVALID_ARGUMENT otherwise); only those
        present are judged, so a candidate request without the commit's inputs passes."""

    def describe(self) -> str:
        return self.title or f"the {self.name} workflow"

    # --- what the evidence proves ----------------------------------------------------------

    def judge(self, evidence: Evidence) -> Any:
        """The workflow's own reading of the evidence, once; handed to the methods below."""
        return None

    def facts(self, evidence: Evidence, judged: Any, situation: Situation) -> ActionFacts:
        """The facts this workflow adds to the one admissibility check."""
        return never_claimed_facts(
            evidence.history, situation, workflow=self.name, action=self.action
        )

    def failed_sequence(self, evidence: Evidence, judged: Any) -> int:
        """The journal sequence of the failure the recovery answers."""
        return evidence.history.unclaimed_failure_sequence

    # --- what the commit checks and records -------------------------------------------------

    def commit_checks(self, evidence: Evidence, judged: Any, content_of: ContentOf) -> None:
        """Checks of stored documents inside the commit transaction, after the admissibility
        check (FAILED_PRECONDITION with the workflow's reason)."""

    def settlement(self, evidence: Evidence, judged: Any) -> dict[str, object]:
        """The payload of :attr:`settlement_kind` (only read when the kind is set)."""
        return {}

    def witness_fields(self, evidence: Evidence, judged: Any) -> dict[str, object]:
        """What the witness records beyond the fields every witness carries."""
        return {}

    def saved_fields(self, inputs: Inputs) -> dict[str, str]:
        """What the saved action records beyond the common fields."""
        return {}
