"""One worker pass: claim a queued continuation, resume its derived checkpoint, run the next
model turns through the installed adapter, and complete or fail the request.

Exit codes: 0 completed, 1 failed (the worker recorded the failure; ``lease_exhausted`` when
too little of the lease was left for the next effect), 2 stopped by a ledger refusal (nothing
more was written; the request stays as the ledger has it), 3 nothing to run, 4 not qualified
(its installed adapter is not the code its profile registers: nothing claimed; the command line
also exits 4 on a configuration error), 5 interrupted by SIGTERM or SIGINT (nothing new started
after the signal; the failure report names the signal; an effect abandoned past the stop's grace
keeps its open intent; :mod:`services.worker.stopping`).

Every effect is bounded by the lease: none starts with less than a second of it left before a
two-second margin, and a command's or a model request's timeout is cut to what is left.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC
from typing import Final

import httpx2
from openai import AsyncOpenAI
from pydantic_ai.exceptions import ModelHTTPError, UsageLimitExceeded
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from forge.continuity.v1 import common_pb2, execution_pb2, ledger_pb2
from services.worker.config import WorkerConfig
from services.worker.effects import DirectoryEvidence, EvidenceStore, JournalEvidence, SourceEffects
from services.worker.journaling import (
    Calls,
    Journal,
    JournalingEffects,
    JournalingModel,
    JournalingTransport,
)
from services.worker.ledger_port import Claimed, LedgerPort, LedgerRefused, Presented
from services.worker.owner import owner_instance
from services.worker.source import profile_digest, profile_problem, source_revision
from services.worker.stopping import (
    EffectBounds,
    LeaseBound,
    LeaseExhausted,
    Shutdown,
    WorkerInterrupted,
    measured_lease,
)
from shared.agent import execute_agentic
from shared.agent.pending import (
    DerivedRecord,
    continuation_task,
    read_derived_checkpoint,
)
from shared.continuity.canonical import sha256_digest
from shared.continuity.timeutil import utc_now
from shared.runtime.errors import DomainError

EXIT_COMPLETED, EXIT_FAILED, EXIT_STOPPED, EXIT_NOTHING_TO_RUN = 0, 1, 2, 3
EXIT_NOT_QUALIFIED, EXIT_INTERRUPTED = 4, 5
#: The refusal of a claim another worker made first.
LOST_RACE: Final = "EXECUTION_REQUEST_NOT_QUEUED"
#: How the worker names a request its automatic selection skips, and how to schedule it again.
ADMISSION_REFUSAL: Final = "admission refusal"
RESCHEDULE_HINT: Final = "run the worker with --execution-request-id to schedule it again"
#: Seconds one provider request may take (the lease bounds the whole run anyway).
PROVIDER_TIMEOUT: Final = 600.0


@dataclass(frozen=True)
class Outcome:
    """How the pass ended: the exit code and the one line the worker prints."""

    exit_code: int
    message: str
    execution_request_id: str = ""
    completion: execution_pb2.CompleteExecutionRequestResponse | None = None
    #: Requests another worker claimed first while this one looked (fleet contention).
    claims_lost: int = 0


def stopped(refused: LedgerRefused, execution_request_id: str) -> Outcome:
    return Outcome(
        EXIT_STOPPED,
        f"stopped: the ledger refused {refused.rpc}: {refused.reason}: {refused.error.message} "
        f"(execution request {execution_request_id} is left as the ledger has it)",
        execution_request_id,
    )


def _candidates(
    config: WorkerConfig, port: LedgerPort, run_id: str, skipped: list[str]
) -> list[str]:
    """The requests of ``run_id`` to try: the one named (whatever its state: the ledger says
    why it cannot be claimed; naming it is the operator's act of scheduling it again), else
    every queued one, oldest first, except those a typed refusal made ineligible for automatic
    scheduling (ADR 0014, rule 3a), which are noted in ``skipped`` with their reason."""
    if config.execution_request_id:
        named = port.get_execution_request(config.execution_request_id)
        return [named.execution_request_id] if named.run_id == run_id else []
    eligible = []
    for request in port.queued(run_id):
        if request.admission_refusal:
            skipped.append(
                f"{request.execution_request_id} ({ADMISSION_REFUSAL} "
                f"{request.admission_refusal}: {RESCHEDULE_HINT})"
            )
        else:
            eligible.append(request.execution_request_id)
    return eligible


def claim_one(
    config: WorkerConfig,
    port: LedgerPort,
    shutdown: Shutdown | None = None,
    contention: list[str] | None = None,
    skipped: list[str] | None = None,
) -> tuple[Claimed, ledger_pb2.Run] | LedgerRefused | None:
    """The first request of the configured runs this worker may claim (the claim repeats every
    current check); else the last refusal, or None when nothing was queued (or a stop was
    requested before a claim). ``contention`` collects the requests another worker claimed
    first (the race a fleet measures); ``skipped`` the requests the automatic selection passed
    over (a typed refusal made them ineligible)."""
    last: LedgerRefused | None = None
    passed_over = skipped if skipped is not None else []
    # The revision is derived from the source tree (services.worker.source), never the run's
    # own read back: a worker deployed with other code than the run's is refused at the claim.
    presented = Presented(
        config.source_revision or source_revision(config.source_dir),
        config.configuration_digest or "",
        config.source_profile,
        profile_digest(),
    )
    owner = owner_instance()
    try:
        queue = _queue(config, port)
    except LedgerRefused as refused:
        return refused
    runs: dict[str, ledger_pb2.Run] = {}
    for run_id, listed in queue:
        try:
            if run_id not in runs:
                runs[run_id] = port.get_run(run_id).run
            candidates = (
                listed if listed is not None else _candidates(config, port, run_id, passed_over)
            )
        except LedgerRefused as refused:
            last = refused
            continue
        for execution_request_id in candidates:
            if shutdown is not None and shutdown.requested:
                return last
            try:
                return port.claim(execution_request_id, runs[run_id], presented, owner), runs[
                    run_id
                ]
            except LedgerRefused as refused:  # claimed by another worker, expired, revoked...
                last = refused
                if refused.reason == LOST_RACE and contention is not None:
                    contention.append(execution_request_id)
    return last


def _queue(config: WorkerConfig, port: LedgerPort) -> list[tuple[str, list[str] | None]]:
    """(run, the requests to try in it; None: read them per run) in the order to try them.
    ``--all-runs``: every queued request eligible for automatic scheduling across runs, oldest
    first, so a fleet drains the queue in admission order; the claim is exclusive, so workers
    that race for one request lose it to exactly one and move on to the next."""
    if config.all_runs and not config.execution_request_id:
        return [(r.run_id, [r.execution_request_id]) for r in port.queued_everywhere()]
    return [(run_id, None) for run_id in config.run_ids]


def claim_entry(
    port: LedgerPort, answer: execution_pb2.ClaimExecutionRequestResponse
) -> common_pb2.JournalEntry:
    """This claim's ``worker_claimed`` entry: the head the worker writes after. The claim answers
    with it; a ledger of an earlier release does not, and the worker reads the journal for it. An
    entry someone else appended since makes the first write stale, which stops the worker."""
    claimed = answer.execution_request
    offered = [answer.worker_claimed_entry] if answer.HasField("worker_claimed_entry") else []
    for entry in offered or reversed(port.journal(claimed.run_id)):
        payload = json.loads(entry.payload_json)
        if (
            entry.kind == common_pb2.JOURNAL_ENTRY_KIND_WORKER_CLAIMED
            and payload.get("execution_request_id") == claimed.execution_request_id
            and payload.get("lease_generation") == claimed.lease.generation
        ):
            return entry
    raise RuntimeError(f"no worker_claimed entry for {claimed.execution_request_id}")


def _causes(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]
        if isinstance(current, BaseExceptionGroup):
            pending += list(current.exceptions)


def failure_reason(error: BaseException) -> str:
    """The machine-readable reason the worker fails the request with."""
    causes = list(_causes(error))
    if any(isinstance(e, UsageLimitExceeded) for e in causes):
        return "usage_limit_exceeded"
    if any(isinstance(e, ModelHTTPError) for e in causes):
        return "provider_refused_request"  # the provider answered with an HTTP error
    return "worker_error"


def goal_claim(output: str, effects: SourceEffects) -> execution_pb2.GoalClaim.ValueType:
    """The worker's own word: satisfied when the model gave its final answer and every command
    it ran succeeded; not satisfied when a command failed. The ledger certifies separately."""
    if any(ran["exit_code"] != 0 for ran in effects.ran):
        return execution_pb2.GOAL_CLAIM_NOT_SATISFIED
    if output.strip():
        return execution_pb2.GOAL_CLAIM_SATISFIED
    return execution_pb2.GOAL_CLAIM_UNKNOWN


async def continue_run(
    config: WorkerConfig, record: DerivedRecord, effects: JournalingEffects, calls: Calls
) -> str:
    """Resume ``record`` (its history, usage and original limits, no new prompt) and run the
    next model turns against the configured provider; returns the final output."""
    transport = JournalingTransport(
        effects.journal, calls, record.digest, provider_timeout=PROVIDER_TIMEOUT
    )
    # The transport bounds each answer by the lease; the client's own timeout stays as a floor.
    async with httpx2.AsyncClient(transport=transport, timeout=PROVIDER_TIMEOUT) as http:
        # max_retries=0: the client never sends a request again by itself.
        client = AsyncOpenAI(
            api_key=config.provider_key,
            base_url=config.provider_url,
            max_retries=0,
            http_client=http,
        )
        model = OpenAIChatModel(
            config.model or record.provider["model"], provider=OpenAIProvider(openai_client=client)
        )
        journaled = JournalingModel(model, effects.journal, calls)
        return await execute_agentic(continuation_task(record), journaled, effects)


def evidence_store(config: WorkerConfig, port: LedgerPort) -> EvidenceStore:
    if config.evidence_dir is not None:
        return DirectoryEvidence(config.evidence_dir)
    return JournalEvidence(port)


def lease_of(claim: Claimed) -> LeaseBound:
    """The claimed lease on this process's monotonic clock, counted from the claim's send by
    the ledger's time in its answer (ADR 0057; a ledger of an earlier release: this host's
    wall clock)."""
    answer = claim.answer
    lease = answer.execution_request.lease
    expires = lease.expires_at.ToDatetime(UTC) if lease.HasField("expires_at") else None
    ledger_time = answer.ledger_time.ToDatetime(UTC) if answer.HasField("ledger_time") else None
    return measured_lease(expires, ledger_time, claim.sent_at, wall_clock=utc_now)


def run_once(
    config: WorkerConfig,
    port: LedgerPort,
    echo: Callable[[common_pb2.JournalEntry], None] | None = None,
    shutdown: Shutdown | None = None,
) -> Outcome:
    """One pass (see the module docstring); ``shutdown``: the stop request the process's
    signals set (none: nobody can ask this pass to stop)."""
    shutdown = shutdown if shutdown is not None else Shutdown()
    problem = profile_problem(config.source_profile)
    if problem is not None:  # its installed adapter is not the code its profile registers
        return Outcome(EXIT_NOT_QUALIFIED, f"not claiming: PROFILE_NOT_QUALIFIED: {problem}")
    lost: list[str] = []
    skipped: list[str] = []
    found = claim_one(config, port, shutdown, lost, skipped)
    if not isinstance(found, tuple):
        if shutdown.requested:
            return Outcome(EXIT_INTERRUPTED, f"stopped by {shutdown.signal_name}: nothing claimed")
        why = f": last refusal {found.rpc}: {found.reason}" if found is not None else ""
        why += f"; not scheduled automatically: {', '.join(skipped)}" if skipped else ""
        where = "any run" if config.all_runs else ", ".join(config.run_ids)
        return Outcome(
            EXIT_NOTHING_TO_RUN, f"nothing to run in {where}{why}", claims_lost=len(lost)
        )
    claim, run = found
    return replace(_run_claimed(config, port, claim, run, echo, shutdown), claims_lost=len(lost))


def _run_claimed(
    config: WorkerConfig,
    port: LedgerPort,
    claimed_by: Claimed,
    run: ledger_pb2.Run,
    echo: Callable[[common_pb2.JournalEntry], None] | None,
    shutdown: Shutdown,
) -> Outcome:
    claimed = claimed_by.answer.execution_request
    exr = claimed.execution_request_id
    bounds = EffectBounds(shutdown, lease_of(claimed_by))
    try:
        claim = claim_entry(port, claimed_by.answer)
        if echo is not None:
            echo(claim)
        journal = Journal(
            port, claimed, claim.hash, echo, source_revision=run.source_revision, bounds=bounds
        )
        journal.head_sequence = claim.sequence
        try:
            record = read_derived_checkpoint(port.blob(claimed.checkpoint_digest))
        except (DomainError, ValueError) as unusable:  # not a checkpoint this worker resumes
            port.fail(claimed, "checkpoint_refused")
            return Outcome(EXIT_FAILED, f"failed {exr}: checkpoint_refused: {unusable}", exr)
        return execute(config, port, claimed, journal, record)
    except LedgerRefused as refused:
        return stopped(refused, exr)


def bounded_end(
    error: BaseException, port: LedgerPort, claimed: common_pb2.ExecutionRequest
) -> Outcome | None:
    """The end of a run a stop request or the lease cut short, after reporting the failure;
    None for any other end."""
    causes = list(_causes(error))
    exr = claimed.execution_request_id
    interrupted = next((e for e in causes if isinstance(e, WorkerInterrupted)), None)
    if interrupted is not None:
        reason = f"worker_stopped_by_{interrupted.signal_name.lower()}"
        port.fail(claimed, reason)
        return Outcome(
            EXIT_INTERRUPTED,
            f"stopped by {interrupted.signal_name}: failed {exr}: {reason} (no effect started "
            "after the signal; an effect abandoned past the grace keeps its open intent)",
            exr,
        )
    exhausted = next((e for e in causes if isinstance(e, LeaseExhausted)), None)
    if exhausted is not None:
        port.fail(claimed, "lease_exhausted")
        return Outcome(EXIT_FAILED, f"failed {exr}: lease_exhausted: {exhausted}", exr)
    return None


def execute(
    config: WorkerConfig,
    port: LedgerPort,
    claimed: common_pb2.ExecutionRequest,
    journal: Journal,
    record: DerivedRecord,
) -> Outcome:
    """Continue the claimed request and complete or fail it; a refused write raises
    :class:`LedgerRefused` (from the ledger port) and nothing more is written."""
    exr = claimed.execution_request_id
    calls = Calls()
    base = SourceEffects(
        config.source_dir,
        evidence_store(config, port),
        config.granted_commands,
        config.command_timeout_seconds,
        journal.bounds,
    )
    effects = JournalingEffects(base, journal, calls)
    try:
        journal.bounds.shutdown.check()  # a signal during the claim: nothing starts
        output = asyncio.run(continue_run(config, record, effects, calls))
    except Exception as error:  # noqa: BLE001 - every end of the run is reported below
        if journal.stopped is not None:
            raise journal.stopped from None
        ended = bounded_end(error, port, claimed)
        if ended is not None:
            return ended
        reason = failure_reason(error)
        port.fail(claimed, reason)
        return Outcome(EXIT_FAILED, f"failed {exr}: {reason}: {error}", exr)
    digest = sha256_digest(output.encode())
    completion = port.complete(claimed, goal_claim(output, base), digest)
    certification = completion.certification
    verdict = "certified" if certification.certified else "not certified"
    open_calls = ", ".join(certification.open_intent_call_ids)
    claim_name = execution_pb2.GoalClaim.Name(completion.goal_claim)
    return Outcome(
        EXIT_COMPLETED,
        f"completed {exr}: goal claim {claim_name.removeprefix('GOAL_CLAIM_').lower()}"
        f"; journal {verdict}{f' (open intents: {open_calls})' if open_calls else ''}"
        f"; completed rounds {completion.completed_rounds}",
        exr,
        completion,
    )
