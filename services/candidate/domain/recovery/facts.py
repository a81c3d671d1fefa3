"""Gathering a recovery candidate's facts, once, and the checks every recovery reviews again.

One snapshot read gives the run, its journal, the ledger's verification and, from the same
snapshot's header, the policy and the run's execution requests (read apart only from a source
without snapshots), so the candidate never mixes two moments. The checkpoint the request resumes
from is read once here; the workflow's own evidence reuses it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from services.candidate.domain.checks import common
from services.candidate.domain.facts import read_snapshot
from services.candidate.domain.model import (
    OUTSTANDING_STATES,
    ExecutionRecord,
    Hold,
    HoldReason,
    PolicyRecord,
    ReadFromSnapshot,
    Snapshot,
    hold,
)
from services.candidate.domain.sources import CandidateSources
from shared.continuity.canonical import intact_blob
from shared.continuity.recovery import Evidence, Inputs, Situation, Workflow
from shared.continuity.request_history import RequestHistory, consumed_from, request_history
from shared.continuity.timeutil import deadline_remaining_seconds
from shared.runtime.errors import NotFound


@dataclass(frozen=True)
class Caller:
    """Who asks: an administrator (authority judged now) or admission recomputing."""

    identity: str
    #: The caller's current roles (role names).
    roles: frozenset[str]
    recomputing: bool = False

    @property
    def has_authority(self) -> bool:
        """Current factory administrator authority."""
        return "factory_administrator" in self.roles

    @property
    def has_execution_authority(self) -> bool:
        """Current execution authority (the rejected boundary and the observation need both)."""
        return "execution_operator" in self.roles


@dataclass(frozen=True)
class RecoveryFacts(ReadFromSnapshot):
    """Everything a recovery candidate is computed from, read once."""

    workflow: Workflow
    snapshot: Snapshot
    policy: PolicyRecord
    executions: tuple[ExecutionRecord, ...]
    qualified: bool
    now: datetime
    history: RequestHistory
    caller: Caller
    inputs: Inputs
    #: The checkpoint the request resumes from (the settlement's derived checkpoint), when
    #: stored intact.
    resumed_checkpoint: bytes | None

    @property
    def bound(self) -> ExecutionRecord | None:
        return next(
            (
                e
                for e in self.executions
                if e.execution_request_id == self.history.execution_request_id
            ),
            None,
        )

    @property
    def state(self) -> str:
        bound = self.bound
        return bound.state.value if bound is not None else "unknown"

    def evidence(self) -> Evidence:
        bound = self.bound
        return Evidence(
            rows=self.entries,
            history=self.history,
            source_revision=self.run.source_revision,
            pending_checkpoint_digest=bound.checkpoint_digest if bound is not None else "",
            inputs=self.inputs,
        )

    def situation(self) -> Situation:
        """The shared facts; admission recomputes for the digest, so it stands in for the
        original actor with authority (the ledger judges the actor at commit)."""
        caller = self.caller
        return Situation(
            state=self.state,
            outstanding=tuple(
                e.execution_request_id for e in self.executions if e.state in OUTSTANDING_STATES
            ),
            workflow_enabled=self.workflow.enabled(self.policy),
            actor=self.history.original_actor if caller.recomputing else caller.identity,
            actor_has_authority=caller.recomputing or self.workflow.roles <= caller.roles,
            consumed=consumed_from(
                self.entries,
                self.run.command_limit,
                deadline_remaining_seconds(self.run.active_deadline, self.now),
            ),
        )


def gather_recovery_facts(
    sources: CandidateSources,
    workflow: Workflow,
    run_id: str,
    request_id: str,
    caller: Caller,
    inputs: Inputs,
    *,
    clock: Callable[[], datetime],
    qualified: Callable[[str], bool],
) -> RecoveryFacts:
    """Read everything once; NOT_FOUND ADMISSION_NOT_FOUND when the request was never
    admitted."""
    snapshot = read_snapshot(sources, run_id)
    policy = snapshot.policy if snapshot.policy is not None else sources.policy()
    executions = (
        snapshot.executions
        if snapshot.executions is not None
        else tuple(sources.execution_requests(run_id))
    )
    now = clock()
    history = request_history(snapshot.entries, request_id)
    if not history.found:
        raise NotFound(
            "ADMISSION_NOT_FOUND",
            f"no admission request {request_id} for run {run_id}",
            metadata={"run_id": run_id, "request_id": request_id},
        )
    digest = history.derived_checkpoint_digest
    return RecoveryFacts(
        workflow=workflow,
        snapshot=snapshot,
        policy=policy,
        executions=executions,
        qualified=qualified(snapshot.run.source_profile),
        now=now,
        history=history,
        caller=caller,
        inputs=inputs,
        resumed_checkpoint=intact_blob(sources.blob, digest),
    )


def checkpoint_intact(facts: RecoveryFacts) -> list[Hold]:
    """The checkpoint the request resumes from (the settlement's derived checkpoint) is stored
    intact."""
    if facts.resumed_checkpoint is not None:
        return []
    return [
        hold(
            HoldReason.CLOSURE_INCOMPLETE,
            facts.history.derived_checkpoint_digest or "derived_checkpoint_digest",
            "the checkpoint the request resumes from is not stored intact",
        )
    ]


#: The checks every held-run candidate shares that a recovery reviews again, then the resumed
#: checkpoint.
RECOVERY_CHECKS: tuple[Callable[[RecoveryFacts], list[Hold]], ...] = (
    common.chain,
    common.origin,
    common.profile_qualified,
    common.time_budget,
    checkpoint_intact,
)
