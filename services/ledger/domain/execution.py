"""Admission tickets, execution requests and finite, fenced leases: the rules, without storage."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from services.ledger.domain.policy import PolicyRevision
from services.ledger.domain.runs import Run
from shared.continuity.canonical import digest_of
from shared.continuity.qualification import is_qualified
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


PENDING_STATES = tuple(RequestState(name) for name in PENDING_STATE_NAMES)
#: States a reconciliation leaves behind: every generation of the request is fenced for ever.
RECONCILED_STATES = (RequestState.RECONCILED, RequestState.UNRESOLVED)


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


@dataclass(frozen=True)
class WorkerSource:
    """What a claiming worker will execute, and in which attempt; it must be exactly the run's
    (a continuity never starts a new attempt)."""

    source_revision: str
    configuration_digest: str
    source_profile: str
    attempt_id: str


def execution_request_id(run_id: str, request_id: str) -> str:
    """Deterministic id: the same admission always names the same execution request."""
    return "exr_" + digest_of({"run_id": run_id, "request_id": request_id})[7:31]


def bound_lease(
    requested_seconds: int,
    window_seconds: int,
    run: Run,
    now: datetime,
) -> int:
    """min(requested, policy window ≤ 7200, frozen provider timeout, remaining active deadline)."""
    if run.spec.time_budget_protocol not in SUPPORTED_TIME_BUDGET_PROTOCOLS:
        raise FailedPrecondition(
            "TIME_BUDGET_UNSUPPORTED",
            f"time-budget protocol {run.spec.time_budget_protocol!r} is not supported",
            metadata={"time_budget_protocol": run.spec.time_budget_protocol},
        )
    bounds = [
        requested_seconds,
        min(window_seconds, MAX_WINDOW_SECONDS),
        run.spec.provider_timeout_seconds,
    ]
    if run.spec.active_deadline is not None:
        bounds.append(math.floor((from_text(run.spec.active_deadline) - now).total_seconds()))
    lease = min(bounds)
    if lease <= 0:
        raise FailedPrecondition(
            "ACTIVE_DEADLINE_PASSED",
            "the run's active deadline leaves no time for a lease",
            metadata={"active_deadline": run.spec.active_deadline or ""},
        )
    return lease


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


def check_policy_for_execution(policy: PolicyRevision, ticket_revision: int) -> None:
    """Revocation stops dispatch and execution: the policy must still be the ticket's, enabled."""
    if not policy.settings.enabled:
        raise FailedPrecondition(
            "POLICY_REVOKED",
            "invalid-read continuity was disabled; queued and claimed continuations stop",
            metadata={"policy_revision": str(policy.revision)},
        )
    if policy.revision != ticket_revision:
        raise FailedPrecondition(
            "POLICY_REVISION_CHANGED",
            f"the ticket was admitted under policy revision {ticket_revision}, "
            f"now {policy.revision}",
            metadata={
                "ticket_revision": str(ticket_revision),
                "current_revision": str(policy.revision),
            },
        )


def check_worker_source(run: Run, presented: WorkerSource) -> None:
    """The claim repeats the current checks: the run's original attempt, source, configuration
    and profile, each as the worker presents it."""
    violations = [
        PreconditionViolation(kind, name, f"expected {expected}, got {given}")
        for kind, name, expected, given in (
            ("ATTEMPT", "attempt_id", run.spec.attempt_id, presented.attempt_id),
            ("SOURCE", "source_revision", run.spec.source_revision, presented.source_revision),
            (
                "CONFIGURATION",
                "configuration_digest",
                run.spec.configuration_digest,
                presented.configuration_digest,
            ),
            ("PROFILE", "source_profile", run.spec.source_profile, presented.source_profile),
        )
        if expected != given
    ]
    if violations:
        raise FailedPrecondition(
            "CLAIM_CHECK_FAILED",
            "the worker's attempt, source, configuration or profile differs from the run's",
            metadata={"mismatched": ",".join(v.subject for v in violations)},
            precondition_violations=violations,
        )
    if not is_qualified(run.spec.source_profile):
        raise FailedPrecondition(
            "PROFILE_NOT_QUALIFIED",
            f"source profile {run.spec.source_profile} is not currently qualified",
            metadata={"source_profile": run.spec.source_profile},
        )
