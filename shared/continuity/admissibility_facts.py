"""The facts of the one admissibility check (``shared.continuity.admissibility``, spec 001, ADR
0009) and what it answers: every caller (candidate, ledger, the recovery workflows) gathers these
plain values, the check reads nothing else. A refused continuation action (ADR 0046) adds the
refusals the ledger's own rules made, so its handoff comes from the same check.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Concern(enum.Enum):
    """The four concerns of the check."""

    ACTION_IDENTITY = "action_identity"
    AUTHORIZATION = "authorization"
    DEPENDENCY = "dependency"
    RESIDUAL_EFFECT = "residual_effect"


@dataclass(frozen=True)
class Refusal:
    """One reason the action is not admissible, as a typed hold (contract ``HoldReason`` and
    ``HoldRequirement`` names without prefix)."""

    concern: Concern
    hold: str
    requirement: str
    subject: str
    detail: str


@dataclass(frozen=True)
class BoundRequest:
    """The execution request the action is bound to, as its native history shows it."""

    request_id: str
    execution_request_id: str
    #: The stored state (queued, claimed, completed, failed, expired, cancelled, ...).
    state: str
    #: The native history records a worker claim (any generation).
    claimed: bool
    #: The native history records the failure at generation 0, after the ownership claim.
    failed_unclaimed: bool
    #: Reported only: expiry alone is no evidence of failure.
    lease_expired: bool = False
    #: The native history proves one worker claim whose provider request was refused before
    #: admission (the failure under that claim's generation, nothing else in between), and an
    #: administrator-reviewed rejection pins the same request. Only the rejected-boundary
    #: workflow sets it; it resolves the claim's residual effect.
    refusal_reviewed: bool = False
    #: A recorded, unexpired verification proves the claim's owner stopped, its exposure stayed
    #: within its reservation and it left no effect or a retry-safe one. Only the reconciliation
    #: workflow sets it; it resolves the claim's residual effect.
    cessation_verified: bool = False
    #: The native history after the refusal recovery proves one consumed turn with exact
    #: pure-read custody (one unavailable evidence observation, at most one retained list
    #: result). Only the read-only observation workflow sets it; it resolves that claim.
    observation_proven: bool = False


@dataclass(frozen=True)
class Consumed:
    """Resources already charged to the run; a recovery never resets them."""

    model_responses: int = 0
    tool_calls: int = 0
    commands_used: int = 0
    command_limit: int = 0
    #: Reported only; -1 when the run has no deadline.
    deadline_remaining_seconds: int = -1


@dataclass(frozen=True)
class Situation:
    """The facts of the one admissibility check every recovery workflow shares, read by the
    caller (the candidate, or the ledger inside its transaction)."""

    state: str
    outstanding: tuple[str, ...]
    workflow_enabled: bool
    actor: str
    actor_has_authority: bool
    consumed: Consumed


@dataclass(frozen=True)
class ReconciliationFacts:
    """The facts only a reconciliation of a claimed request adds (ADR 0010)."""

    #: ``retry_stage`` or ``mark_unresolved``.
    decision: str
    #: Every reason no recorded, unexpired verification proves cessation, bounded exposure and
    #: no effect or retry-safe (empty: proven). A timeout or a missing result is such a reason.
    verification_problems: tuple[str, ...]
    #: Every limit that leaves a retry nothing to run under (command budget, active deadline).
    budget_problems: tuple[str, ...] = ()
    #: ``mark_unresolved`` only: an administrator releases the claim although no recorded
    #: verification proves the prior owner ceased (ADR 0045); the decision records it.
    cessation_unproven_acknowledged: bool = False


#: States that end a request nobody claimed: failed before any claim, or its lease expired
#: unclaimed. With a native history proving no claim, the never-claimed recovery may follow.
UNCLAIMED_END_STATES = ("failed", "expired")
RETRY_STAGE = "retry_stage"
MARK_UNRESOLVED = "mark_unresolved"
#: The states only a reconciliation decision leaves a request in.
DECIDED_STATES = ("reconciled", "unresolved")


#: Requirements only a refused continuation action names, beside the contract's
#: ``HoldRequirement`` names (POLICY, CUSTODY, QUALIFICATION, SOURCE, AUTHORITY, NOT_ELIGIBLE):
#: the lease is not the caller's (LEASE), the reviewed state moved (REVIEW), another ticket
#: holds the run or the consumed response (TICKET).
LEASE, REVIEW, TICKET = "LEASE", "REVIEW", "TICKET"


@dataclass(frozen=True)
class RefusedAction:
    """A continuation action the ledger refused by its own rules, as read when it was refused:
    each refusal's ``hold`` is the refusal's reason, its requirement what would clear it."""

    refusals: tuple[Refusal, ...]


@dataclass(frozen=True)
class ActionFacts:
    """Everything the check decides on; gathered by the caller, never by the check."""

    workflow: str
    #: The action's permitted name when admissible (e.g. ``request_invalid_read_recovery``).
    action: str
    bound: BoundRequest
    #: Recovery identifiers already stored for this request and workflow.
    spent_by: tuple[str, ...]
    #: The policy and the workflow's setting allow the action.
    workflow_enabled: bool
    actor: str
    original_actor: str
    #: The actor currently holds the authority the workflow needs.
    actor_has_authority: bool
    #: That authority in words, for the refusal's detail.
    required_authority: str = "factory administrator"
    #: Other queued or claimed execution requests of the run.
    outstanding: tuple[str, ...] = ()
    #: Journal sequences after the bound request's failure that nothing accounts for.
    unaccounted_sequences: tuple[int, ...] = ()
    #: Operations with a durable unknown outcome (e.g. tool call ids).
    uncertain: tuple[str, ...] = ()
    #: (description, journal sequence) of effects known to have happened.
    known_effects: tuple[tuple[str, int], ...] = ()
    consumed: Consumed = Consumed()
    #: None unless the action rests on a reviewed provider refusal; then every reason the native
    #: history and the review do not prove the supported case (empty: proven).
    refusal_problems: tuple[str, ...] | None = None
    #: None unless the action reconciles a claimed request whose owner was lost; then any
    #: current factory administrator may act (``original_actor`` is not read).
    reconciliation: ReconciliationFacts | None = None
    #: None unless the action rests on read-only observation custody; then every reason the
    #: native history does not prove the supported case (empty: proven).
    observation_problems: tuple[str, ...] | None = None
    #: None unless the ledger's own rules refused a continuation action (a worker claim, a
    #: fenced write, a cancel, an admission or recovery commit; ADR 0046); then those refusals
    #: are the check's, and the handoff says what they leave permitted.
    refused: RefusedAction | None = None


@dataclass(frozen=True)
class PermittedAction:
    action: str
    description: str


@dataclass(frozen=True)
class KnownEffect:
    """An effect the journal shows happened, at its sequence."""

    description: str
    journal_sequence: int


@dataclass(frozen=True)
class UnresolvedAlternative:
    """An operation whose outcome is unknown, and the alternatives the evidence still permits."""

    subject: str
    alternatives: tuple[str, ...]


@dataclass(frozen=True)
class RemainingObligation:
    """What is left to do, and what blocks it ("" when nothing does)."""

    description: str
    blocked_by: str


@dataclass(frozen=True)
class Handoff:
    """Spec 001's handoff: what an operator gets instead of a bare "held". The one type of the
    candidate's payload and the admissibility check's (contract ``HandoffPayload``); only the
    check binds requests."""

    known_effects: tuple[KnownEffect, ...]
    unresolved_alternatives: tuple[UnresolvedAlternative, ...]
    remaining_obligations: tuple[RemainingObligation, ...]
    permitted_next_actions: tuple[PermittedAction, ...]
    consumed: Consumed
    bound_requests: tuple[BoundRequest, ...] = ()


@dataclass(frozen=True)
class Admissible:
    handoff: Handoff


@dataclass(frozen=True)
class Unresolved:
    """A terminal outcome, distinct from failed and from done."""

    refusals: tuple[Refusal, ...]
    handoff: Handoff


Outcome = Admissible | Unresolved
