"""The candidate's vocabulary: what it reads (run, journal, policy, execution requests, analysis)
and what it returns (holds, proof, digests, handoff). Plain data, no transport types."""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.continuity.admissibility_facts import Handoff
from shared.continuity.journal_chain import Verification
from shared.continuity.journal_closure import payload_object, payload_text
from shared.continuity.records import direct_constructor
from shared.contract.terms import PENDING_STATE_NAMES
from shared.runtime.errors import FailedPrecondition, InvalidArgument

# --- inputs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRecord:
    """The ledger's record of a run and its original task attempt."""

    run_id: str
    task_id: str
    attempt_id: str
    source_revision: str
    configuration_digest: str
    provider_timeout_seconds: int
    active_deadline: datetime | None
    command_limit: int
    time_budget_protocol: str
    source_profile: str
    run_digest: str


@dataclass(frozen=True)
class JournalHead:
    """The last entry of a journal: (sequence, hash); (0, genesis) when empty."""

    sequence: int
    hash: str


@dataclass(frozen=True)
class Entry:
    """One native journal entry as read from the ledger.

    ``kind`` is the stored kind name (``run_started``, ``tool_outcome``...); ``recorded_at`` is
    the stored ISO-8601 text (microseconds, trailing Z) that the entry hash covers.
    """

    run_id: str
    sequence: int
    kind: str
    payload_json: str
    prev_hash: str
    hash: str
    actor: str
    recorded_at: str

    @functools.cached_property
    def payload(self) -> dict[str, Any] | None:
        """The parsed payload, or None when ``payload_json`` is not a JSON object. Parsed on first
        use: most entries of a long journal are only ever looked at by kind and sequence."""
        return payload_object(self.payload_json)

    def text(self, key: str) -> str:
        """A payload value as text ("" when absent or not a string)."""
        return payload_text(self.payload, key)


#: ``Entry(...)`` for every entry of a snapshot.
build_entry = direct_constructor(Entry)


@dataclass(frozen=True)
class ChainVerification:
    """The ledger's own recomputation of the journal chain."""

    valid: bool
    first_broken_sequence: int
    problem: str
    head: JournalHead


@dataclass(frozen=True)
class PolicyRecord:
    """The current policy revision (only what the candidate evaluates)."""

    revision: int
    enabled: bool
    digest: str
    allow_unavailable_source_observations: bool
    #: Enables the rejected-boundary (provider refusal before admission) recovery.
    allow_pre_admission_recovery: bool = False
    #: Enables the read-only observation recovery.
    allow_readonly_observation_recovery: bool = False


class ExecutionState(enum.Enum):
    QUEUED = "queued"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    FAILED = "failed"
    #: Retired by a RETRY_STAGE reconciliation (the retry is the chain's current member).
    RECONCILED = "reconciled"
    #: Terminal unresolved after a MARK_UNRESOLVED reconciliation.
    UNRESOLVED = "unresolved"
    CANCELLED = "cancelled"
    #: Queued, never claimed again, and its lease ran out.
    EXPIRED = "expired"
    #: A state this release does not know (a newer ledger).
    UNKNOWN = "unknown"


# Queued or executing: a native claim exists and no second continuation may be prepared.
OUTSTANDING_STATES = frozenset(ExecutionState(name) for name in PENDING_STATE_NAMES)


@dataclass(frozen=True)
class ExecutionRecord:
    """One execution request of the run."""

    execution_request_id: str
    request_id: str
    state: ExecutionState
    #: The checkpoint the pending request resumes from.
    checkpoint_digest: str = ""


@dataclass(frozen=True)
class Snapshot:
    """One consistent read of the run, its whole journal and the ledger's verification."""

    run: RunRecord
    head: JournalHead
    entries: tuple[Entry, ...]
    verification: ChainVerification
    # Read in the same snapshot when the source reads one (None: read apart, after it).
    policy: PolicyRecord | None = None
    executions: tuple[ExecutionRecord, ...] | None = None
    # The closure's blobs as the same snapshot read them, by digest, when asked for and stored
    # (unverified: a reader checks each one's digest before using it).
    blobs: Mapping[str, bytes] = field(default_factory=dict)
    # This service's own recomputation of the chain over exactly ``entries``, made while they
    # arrived (journal.chain_verifier), so it overlaps the ledger's work on the stream instead of
    # following it; None: the chain check recomputes it.
    recomputed: Verification | None = None


class ReadFromSnapshot:
    """Facts gathered from one snapshot: its run, head and entries, as the checks every held-run
    candidate shares read them (``checks.HeldRun``). Mixed into the invalid-read ``Facts`` and
    a recovery's ``RecoveryFacts``; it adds no dataclass field."""

    snapshot: Snapshot

    @property
    def run(self) -> RunRecord:
        return self.snapshot.run

    @property
    def head(self) -> JournalHead:
        return self.snapshot.head

    @property
    def entries(self) -> tuple[Entry, ...]:
        return self.snapshot.entries


@dataclass(frozen=True)
class ConsumedCall:
    """One tool call of the consumed response."""

    call_id: str
    tool_name: str
    #: The grant the historical tool contract gives the call ("" for an unknown tool).
    grant: str
    #: ``digest_of`` the call's parsed arguments as the pinned SDK parsed the response ("" when
    #: they are not JSON).
    args_digest: str


@dataclass(frozen=True)
class AnalysisFinding:
    """One reason reconstruction's analysis gives for refusing a version."""

    reason: str
    element: str
    message: str


@dataclass(frozen=True)
class ResponseAnalysis:
    """Reconstruction's read-only analysis of the consumed response."""

    tool_calls: tuple[ConsumedCall, ...]
    evidence_call_id: str
    evidence_query_json: str
    accepted_by_advertised_schema: bool
    rejected_by_pinned_validator: bool
    validator_error: str
    runtime_identity_json: str
    validator_identity: str
    common_holds: tuple[AnalysisFinding, ...]
    v1_holds: tuple[AnalysisFinding, ...]
    v2_holds: tuple[AnalysisFinding, ...]

    def holds(self, version: int) -> tuple[AnalysisFinding, ...]:
        return self.common_holds + (self.v1_holds if version == 1 else self.v2_holds)


@dataclass(frozen=True)
class Reconstruction:
    """What the candidate keeps of a reconstruction: the digests the proof binds (and the derived
    checkpoint bytes, when the source returned them, which the admission commit stores)."""

    derived_checkpoint_digest: str
    witness_digest: str
    derived_checkpoint: bytes = field(default=b"", repr=False)


@dataclass(frozen=True)
class AnalysisAndReconstruction:
    """Reconstruction's analysis and, from the same call, the reconstruction or its typed
    refusal (both None when the call did not attempt it)."""

    analysis: ResponseAnalysis
    reconstruction: Reconstruction | None = None
    reconstruction_refusal: FailedPrecondition | InvalidArgument | None = None


@dataclass(frozen=True)
class PendingReproduction:
    """What the candidate keeps of a reproduced pending request: its wire facts and the digests
    of its canonical parts (``history``, ``model_settings``, ``tool_definitions``,
    ``request_parameters``, ``usage``, ``limits``)."""

    derived_checkpoint_digest: str
    model: str
    wire_digest: str
    wire_length: int
    part_digests: Mapping[str, str]
    reproduction_digest: str


# --- outputs --------------------------------------------------------------------------------


class HoldReason(enum.Enum):
    """Typed hold reasons; names equal the contract's ``HoldReason`` values without prefix."""

    POLICY_DISABLED = "POLICY_DISABLED"
    JOURNAL_CHAIN_BROKEN = "JOURNAL_CHAIN_BROKEN"
    CLOSURE_INCOMPLETE = "CLOSURE_INCOMPLETE"
    CONSUME_MISSING = "CONSUME_MISSING"
    IDENTITY_UNREGISTERED = "IDENTITY_UNREGISTERED"
    QUERY_VALID = "QUERY_VALID"
    QUERY_NOT_ADVERTISED = "QUERY_NOT_ADVERTISED"
    SIBLING_CALL = "SIBLING_CALL"
    UNKNOWN_OR_WRITABLE_CALL = "UNKNOWN_OR_WRITABLE_CALL"
    UNSUPPORTED_CONTENT = "UNSUPPORTED_CONTENT"
    UNACCOUNTED_EFFECTS = "UNACCOUNTED_EFFECTS"
    UNRESOLVED_CUSTODY = "UNRESOLVED_CUSTODY"
    RUN_NOT_HELD = "RUN_NOT_HELD"
    ATTEMPT_MISMATCH = "ATTEMPT_MISMATCH"
    SOURCE_OR_CONFIGURATION_CHANGED = "SOURCE_OR_CONFIGURATION_CHANGED"
    PROFILE_NOT_QUALIFIED = "PROFILE_NOT_QUALIFIED"
    CLAIM_OUTSTANDING = "CLAIM_OUTSTANDING"
    MIGRATION_REFUSED = "MIGRATION_REFUSED"
    ERROR_MESSAGE_ONLY = "ERROR_MESSAGE_ONLY"
    TIME_BUDGET_UNSUPPORTED = "TIME_BUDGET_UNSUPPORTED"
    WORKER_CLAIMED = "WORKER_CLAIMED"
    AUTHORITY_MISSING = "AUTHORITY_MISSING"
    RECOVERY_SPENT = "RECOVERY_SPENT"
    REQUEST_NOT_FAILED_UNCLAIMED = "REQUEST_NOT_FAILED_UNCLAIMED"
    REFUSAL_NOT_PROVEN = "REFUSAL_NOT_PROVEN"
    REQUEST_NOT_REPRODUCED = "REQUEST_NOT_REPRODUCED"
    OBSERVATION_NOT_PROVEN = "OBSERVATION_NOT_PROVEN"
    CALL_NOT_BOUND = "CALL_NOT_BOUND"
    RECONSTRUCTION_REFUSED = "RECONSTRUCTION_REFUSED"

    # Members are singletons compared by identity, so the identity hash agrees with equality;
    # Enum's own hashes the name in Python, a call per hold in every set and table it meets.
    __hash__ = object.__hash__


class Requirement(enum.Enum):
    """What would clear a hold; names equal the contract's ``HoldRequirement`` values."""

    POLICY = "POLICY"
    CUSTODY = "CUSTODY"
    QUALIFICATION = "QUALIFICATION"
    SOURCE = "SOURCE"
    AUTHORITY = "AUTHORITY"
    NOT_ELIGIBLE = "NOT_ELIGIBLE"

    __hash__ = object.__hash__  # as HoldReason's


# The one place each reason's clearing requirement is decided.
REQUIREMENTS: dict[HoldReason, Requirement] = {
    HoldReason.POLICY_DISABLED: Requirement.POLICY,
    HoldReason.JOURNAL_CHAIN_BROKEN: Requirement.NOT_ELIGIBLE,
    HoldReason.CLOSURE_INCOMPLETE: Requirement.NOT_ELIGIBLE,
    HoldReason.CONSUME_MISSING: Requirement.NOT_ELIGIBLE,
    HoldReason.IDENTITY_UNREGISTERED: Requirement.QUALIFICATION,
    HoldReason.QUERY_VALID: Requirement.NOT_ELIGIBLE,
    HoldReason.QUERY_NOT_ADVERTISED: Requirement.NOT_ELIGIBLE,
    HoldReason.SIBLING_CALL: Requirement.NOT_ELIGIBLE,
    HoldReason.UNKNOWN_OR_WRITABLE_CALL: Requirement.NOT_ELIGIBLE,
    HoldReason.UNSUPPORTED_CONTENT: Requirement.NOT_ELIGIBLE,
    HoldReason.UNACCOUNTED_EFFECTS: Requirement.CUSTODY,
    HoldReason.UNRESOLVED_CUSTODY: Requirement.CUSTODY,
    HoldReason.RUN_NOT_HELD: Requirement.NOT_ELIGIBLE,
    HoldReason.ATTEMPT_MISMATCH: Requirement.NOT_ELIGIBLE,
    HoldReason.SOURCE_OR_CONFIGURATION_CHANGED: Requirement.SOURCE,
    HoldReason.PROFILE_NOT_QUALIFIED: Requirement.QUALIFICATION,
    HoldReason.CLAIM_OUTSTANDING: Requirement.NOT_ELIGIBLE,
    HoldReason.MIGRATION_REFUSED: Requirement.NOT_ELIGIBLE,
    HoldReason.ERROR_MESSAGE_ONLY: Requirement.NOT_ELIGIBLE,
    HoldReason.TIME_BUDGET_UNSUPPORTED: Requirement.NOT_ELIGIBLE,
    HoldReason.WORKER_CLAIMED: Requirement.CUSTODY,
    HoldReason.AUTHORITY_MISSING: Requirement.AUTHORITY,
    HoldReason.RECOVERY_SPENT: Requirement.NOT_ELIGIBLE,
    HoldReason.REQUEST_NOT_FAILED_UNCLAIMED: Requirement.NOT_ELIGIBLE,
    HoldReason.REFUSAL_NOT_PROVEN: Requirement.CUSTODY,
    HoldReason.REQUEST_NOT_REPRODUCED: Requirement.NOT_ELIGIBLE,
    HoldReason.OBSERVATION_NOT_PROVEN: Requirement.CUSTODY,
    HoldReason.CALL_NOT_BOUND: Requirement.CUSTODY,
    HoldReason.RECONSTRUCTION_REFUSED: Requirement.NOT_ELIGIBLE,
}


@dataclass(frozen=True)
class Hold:
    """One typed reason the candidate is held, what clears it, and the element concerned."""

    reason: HoldReason
    requirement: Requirement
    detail: str
    subject: str


_build_hold = direct_constructor(Hold)  # a held long journal has a hold per entry


def hold(reason: HoldReason, subject: str, detail: str) -> Hold:
    return _build_hold(reason, REQUIREMENTS[reason], detail, subject)


def hold_maker(reason: HoldReason) -> Callable[[str, str], Hold]:
    """``hold(reason, subject, detail)`` as a function of (subject, detail), for a check that
    finds the same reason many times (its requirement looked up once)."""
    requirement = REQUIREMENTS[reason]

    def make(subject: str, detail: str) -> Hold:
        return _build_hold(reason, requirement, detail, subject)

    return make


@dataclass(frozen=True)
class Proof:
    """The eligibility evidence (partial when held)."""

    checkpoint_digest: str = ""
    consumed_response_digest: str = ""
    call_id: str = ""
    query_json: str = ""
    accepted_by_advertised_schema: bool = False
    rejected_by_pinned_validator: bool = False
    validator_error: str = ""
    runtime_identity: str = ""
    validator_identity: str = ""
    derived_checkpoint_digest: str = ""
    witness_digest: str = ""
    consume_sequence: int = 0

    def canonical(self) -> dict[str, Any]:
        return {
            "checkpoint_digest": self.checkpoint_digest,
            "consumed_response_digest": self.consumed_response_digest,
            "call_id": self.call_id,
            "query_json": self.query_json,
            "accepted_by_advertised_schema": self.accepted_by_advertised_schema,
            "rejected_by_pinned_validator": self.rejected_by_pinned_validator,
            "validator_error": self.validator_error,
            "runtime_identity": self.runtime_identity,
            "validator_identity": self.validator_identity,
            "derived_checkpoint_digest": self.derived_checkpoint_digest,
            "witness_digest": self.witness_digest,
            "consume_sequence": self.consume_sequence,
        }


@dataclass(frozen=True)
class Qualification:
    source_profile: str
    qualified: bool


@dataclass(frozen=True)
class Digests:
    candidate_digest: str
    run_digest: str
    journal_digest: str
    policy_digest: str


@dataclass(frozen=True)
class Candidate:
    """The read-only evaluation of a held run."""

    run_id: str
    attempt_id: str
    eligible: bool
    version: int
    digests: Digests
    proof: Proof
    qualification: Qualification
    policy_revision: int
    source_digest: str
    custody_digest: str
    holds: tuple[Hold, ...]
    handoff: Handoff
    journal_head: JournalHead
