"""Admission tickets, execution requests and finite, fenced leases: the rules, without storage."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from services.ledger.domain.runs import Run
from shared.continuity.canonical import digest_of
from shared.continuity.timeutil import from_text, to_text
from shared.contract.terms import (
    MAX_WINDOW_SECONDS,
    PENDING_STATE_NAMES,
    SUPPORTED_TIME_BUDGET_PROTOCOLS,
)
from shared.runtime.errors import FailedPrecondition, PermissionDenied, PreconditionViolation


class RequestState(enum.Enum):
    """Execution request states (stored names)."""

    QUEUED = "queued"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    FAILED = "failed"
    #: Retired by a RETRY_STAGE reconciliation; its generations are fenced for ever.
    RECONCILED = "reconciled"
    #: Terminal unresolved (MARK_UNRESOLVED); distinct from failed and from done.
    UNRESOLVED = "unresolved"
    #: Cancelled by its operator or an administrator; its generations are fenced for ever.
    CANCELLED = "cancelled"
    #: Queued, never claimed, and its lease ran out: it no longer counts against any cap, and
    #: its native history (``request_event`` ``expired`` at generation 0) proves no claim.
    EXPIRED = "expired"


PENDING_STATES = tuple(RequestState(name) for name in PENDING_STATE_NAMES)
#: States a reconciliation leaves behind: every generation of the request is fenced for ever.
RECONCILED_STATES = (RequestState.RECONCILED, RequestState.UNRESOLVED)
#: The role the ticket's original operator must still hold for its request to be claimed and its
#: commands dispatched (the role the admission route required).
OPERATOR_ROLE = "execution_operator"
#: The role that may cancel any execution request.
ADMINISTRATOR_ROLE = "factory_administrator"


@dataclass(frozen=True)
class ExecutionRequestRecord:
    """One queued continuation and its lease."""

    execution_request_id: str
    run_id: str
    attempt_id: str
    request_id: str
    checkpoint_digest: str
    policy_revision: int
    state: RequestState
    lease_generation: int
    lease_seconds: int
    lease_expires_at: str | None
    owner: str
    created_at: str
    updated_at: str
    #: The reason of the native admission-refusal record written for this request; a request
    #: with one is ineligible for automatic scheduling ("" while eligible).
    admission_refusal: str = ""


@dataclass(frozen=True)
class WorkerSource:
    """What a claiming worker will execute, and in which attempt; it must be exactly the run's
    (a continuity never starts a new attempt)."""

    source_revision: str
    configuration_digest: str
    source_profile: str
    attempt_id: str
    #: The qualified profile digest of the worker's installed code, as the worker computed it;
    #: "" when not presented (a worker of an earlier release; fenced writes never carry it).
    profile_digest: str = ""


def execution_request_id(run_id: str, request_id: str) -> str:
    """Deterministic id: the same admission always names the same execution request."""
    return "exr_" + digest_of({"run_id": run_id, "request_id": request_id})[7:31]


class LeaseLimit(enum.Enum):
    """The bounds of the one lease rule, in the order a tie is attributed: a bound that would
    also cap a longer request wins a tie, so the request wins only when it is strictly the
    smallest ("as requested" then means more was available)."""

    POLICY_WINDOW = "policy_window"
    PROVIDER_TIMEOUT = "provider_timeout"
    ACTIVE_DEADLINE = "active_deadline"
    MAXIMUM_WINDOW = "maximum_window"
    REQUESTED = "requested"


@dataclass(frozen=True)
class LeaseBounds:
    """Every bound the one lease rule applied to a grant, and which one won; stored with the
    ticket, recovery or reconciliation that granted the lease so its answer explains it."""

    requested_seconds: int
    policy_window_seconds: int
    provider_timeout_seconds: int
    #: Seconds left before the run's active deadline at the grant; -1 when the run has none.
    deadline_remaining_seconds: int
    maximum_seconds: int
    granted_seconds: int
    limited_by: LeaseLimit

    def to_record(self) -> dict[str, object]:
        return {
            "requested_seconds": self.requested_seconds,
            "policy_window_seconds": self.policy_window_seconds,
            "provider_timeout_seconds": self.provider_timeout_seconds,
            "deadline_remaining_seconds": self.deadline_remaining_seconds,
            "maximum_seconds": self.maximum_seconds,
            "granted_seconds": self.granted_seconds,
            "limited_by": self.limited_by.value,
        }

    @classmethod
    def from_record(cls, record: object) -> LeaseBounds | None:
        """The stored bounds; None for a record written before bounds were stored. A damaged
        value raises ValueError, TypeError or KeyError (each record module maps them)."""
        if record is None:
            return None
        if not isinstance(record, dict):
            raise TypeError("lease_bounds must be an object")
        return cls(
            requested_seconds=int(record["requested_seconds"]),
            policy_window_seconds=int(record["policy_window_seconds"]),
            provider_timeout_seconds=int(record["provider_timeout_seconds"]),
            deadline_remaining_seconds=int(record["deadline_remaining_seconds"]),
            maximum_seconds=int(record["maximum_seconds"]),
            granted_seconds=int(record["granted_seconds"]),
            limited_by=LeaseLimit(record["limited_by"]),
        )


def _limits(window_seconds: int, run: Run, now: datetime) -> dict[LeaseLimit, int]:
    """The bounds every grant made now obeys (the request aside)."""
    limits = {
        LeaseLimit.POLICY_WINDOW: window_seconds,
        LeaseLimit.PROVIDER_TIMEOUT: run.spec.provider_timeout_seconds,
        LeaseLimit.MAXIMUM_WINDOW: MAX_WINDOW_SECONDS,
    }
    deadline = run.spec.active_deadline_at
    if deadline is not None:
        limits[LeaseLimit.ACTIVE_DEADLINE] = max(0, math.floor((deadline - now).total_seconds()))
    return limits


def grantable_lease(window_seconds: int, run: Run, now: datetime) -> int:
    """The one lease-bound rule: the longest lease a grant made now may carry, min(policy window
    ≤ 7200, frozen provider timeout, remaining active deadline); 0 when none may be granted (the
    deadline has passed, or the run's time-budget protocol is unsupported). The run answer
    reports it so the console offers it without a copy of the rule."""
    if run.spec.time_budget_protocol not in SUPPORTED_TIME_BUDGET_PROTOCOLS:
        return 0
    return max(0, min(_limits(window_seconds, run, now).values()))


def lease_bounds(
    requested_seconds: int, window_seconds: int, run: Run, now: datetime
) -> LeaseBounds:
    """min(requested, the grantable lease), with every bound and the one that won."""
    limits = {LeaseLimit.REQUESTED: requested_seconds, **_limits(window_seconds, run, now)}
    granted = max(0, min(limits.values()))
    winner = next(limit for limit in LeaseLimit if limits.get(limit, granted + 1) <= granted)
    return LeaseBounds(
        requested_seconds=requested_seconds,
        policy_window_seconds=window_seconds,
        provider_timeout_seconds=run.spec.provider_timeout_seconds,
        deadline_remaining_seconds=limits.get(LeaseLimit.ACTIVE_DEADLINE, -1),
        maximum_seconds=MAX_WINDOW_SECONDS,
        granted_seconds=granted,
        limited_by=winner,
    )


def bound_lease(
    requested_seconds: int,
    window_seconds: int,
    run: Run,
    now: datetime,
) -> LeaseBounds:
    """min(requested, the grantable lease) with its bounds; refused when nothing may be
    granted."""
    if run.spec.time_budget_protocol not in SUPPORTED_TIME_BUDGET_PROTOCOLS:
        raise FailedPrecondition(
            "TIME_BUDGET_UNSUPPORTED",
            f"time-budget protocol {run.spec.time_budget_protocol!r} is not supported",
            metadata={"time_budget_protocol": run.spec.time_budget_protocol},
        )
    bounds = lease_bounds(requested_seconds, window_seconds, run, now)
    if bounds.granted_seconds <= 0:
        raise FailedPrecondition(
            "ACTIVE_DEADLINE_PASSED",
            "the run's active deadline leaves no time for a lease",
            metadata={"active_deadline": run.spec.active_deadline or ""},
        )
    return bounds


def lease_expiry(now: datetime, seconds: int) -> str:
    return to_text(now + timedelta(seconds=seconds))


def queued_request(
    *,
    execution_request_id: str,
    run_id: str,
    attempt_id: str,
    request_id: str,
    checkpoint_digest: str,
    policy_revision: int,
    lease_seconds: int,
    now: datetime,
) -> ExecutionRequestRecord:
    """A new execution request: queued, generation 0, no owner, its lease counted from ``now``."""
    created_at = to_text(now)
    return ExecutionRequestRecord(
        execution_request_id=execution_request_id,
        run_id=run_id,
        attempt_id=attempt_id,
        request_id=request_id,
        checkpoint_digest=checkpoint_digest,
        policy_revision=policy_revision,
        state=RequestState.QUEUED,
        lease_generation=0,
        lease_seconds=lease_seconds,
        lease_expires_at=lease_expiry(now, lease_seconds),
        owner="",
        created_at=created_at,
        updated_at=created_at,
    )


def check_worker_write(
    record: ExecutionRequestRecord, worker: str, generation: int, now: datetime
) -> None:
    """Every worker write: the caller owns the claim, holds the current generation, in time."""
    if record.state in RECONCILED_STATES:
        # The old owner's late write after a reconciliation: fenced for ever, whatever its
        # generation, so its results can never complete or satisfy the retry.
        raise FailedPrecondition(
            "LEASE_FENCED_BY_RECONCILIATION",
            f"execution request {record.execution_request_id} was reconciled "
            f"({record.state.value}); generation {generation} and every other are fenced",
            metadata={
                "execution_request_id": record.execution_request_id,
                "state": record.state.value,
            },
        )
    if record.state is RequestState.CANCELLED:
        raise FailedPrecondition(
            "EXECUTION_REQUEST_CANCELLED",
            f"execution request {record.execution_request_id} was cancelled; "
            f"generation {generation} and every other are fenced",
            metadata={"execution_request_id": record.execution_request_id},
        )
    if record.state is not RequestState.CLAIMED:
        raise FailedPrecondition(
            "EXECUTION_REQUEST_NOT_CLAIMED",
            f"execution request is {record.state.value}, not claimed",
            metadata={"state": record.state.value},
        )
    if generation != record.lease_generation:
        raise FailedPrecondition(
            "LEASE_GENERATION_STALE",
            f"lease generation {generation} is stale; current is {record.lease_generation}",
            metadata={"current_generation": str(record.lease_generation)},
            precondition_violations=[
                PreconditionViolation(
                    "LEASE_GENERATION",
                    record.execution_request_id,
                    f"current generation is {record.lease_generation}",
                )
            ],
        )
    if record.owner != worker:
        raise PermissionDenied(
            "NOT_LEASE_OWNER",
            f"{worker} does not own execution request {record.execution_request_id}",
            metadata={"identity": worker},
        )
    check_not_expired(record, now)


def check_not_expired(record: ExecutionRequestRecord, now: datetime) -> None:
    if record.lease_expires_at is not None and now >= from_text(record.lease_expires_at):
        raise FailedPrecondition(
            "LEASE_EXPIRED",
            f"the lease of {record.execution_request_id} expired at {record.lease_expires_at}",
            metadata={"lease_expires_at": record.lease_expires_at},
        )


def claimed(record: ExecutionRequestRecord, worker: str, now: str) -> ExecutionRequestRecord:
    return replace(
        record,
        state=RequestState.CLAIMED,
        lease_generation=record.lease_generation + 1,
        owner=worker,
        updated_at=now,
    )


def finished(
    record: ExecutionRequestRecord, state: RequestState, now: str
) -> ExecutionRequestRecord:
    return replace(record, state=state, updated_at=now)


def cancellable(
    record: ExecutionRequestRecord, actor: str, operator: str, roles: frozenset[str]
) -> bool:
    """Whether ``actor`` may cancel ``record``: PermissionDenied unless it is the ticket's
    operator with current operator authority or an administrator; False when the request is
    already cancelled (an identical repeat reads it back); FailedPrecondition when it is in any
    other final state."""
    if ADMINISTRATOR_ROLE not in roles and not (actor == operator and OPERATOR_ROLE in roles):
        raise PermissionDenied(
            "CANCEL_NOT_PERMITTED",
            f"only {operator}, who admitted the request, with current {OPERATOR_ROLE} authority, "
            f"or a {ADMINISTRATOR_ROLE} may cancel it",
            metadata={"identity": actor, "operator": operator},
        )
    if record.state is RequestState.CANCELLED:
        return False
    if record.state not in PENDING_STATES:
        raise FailedPrecondition(
            "EXECUTION_REQUEST_NOT_CANCELLABLE",
            f"execution request is {record.state.value}; only a queued or claimed one is cancelled",
            metadata={"state": record.state.value},
        )
    return True


def due_for_expiry(record: ExecutionRequestRecord, now: datetime) -> bool:
    """Queued (never claimed, or requeued by a recovery and not claimed again) and its lease
    ran out."""
    return (
        record.state is RequestState.QUEUED
        and record.lease_expires_at is not None
        and now >= from_text(record.lease_expires_at)
    )


def as_read(record: ExecutionRequestRecord, now: datetime) -> ExecutionRequestRecord:
    """The request as a reader sees it at ``now``: a queued request past its lease reads
    ``expired`` even before the sweep writes it (ADR 0039), since nothing can claim it any
    more. Only the state is derived; the stored row and its journal wait for the sweep."""
    return replace(record, state=RequestState.EXPIRED) if due_for_expiry(record, now) else record


def states_to_read(states: tuple[RequestState, ...]) -> tuple[RequestState, ...]:
    """The stored states to fetch so that :func:`as_read` can answer a filter on ``states``:
    an ``expired`` reader must also see the queued rows that are past their lease."""
    if RequestState.EXPIRED in states and RequestState.QUEUED not in states:
        return (*states, RequestState.QUEUED)
    return states
