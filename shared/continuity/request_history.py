"""A continuity request's complete native event history, read from the run's journal.

The candidate service and the ledger both turn journal entries into the facts of the
admissibility check (``shared.continuity.admissibility``) with this one reader, so the two can
never read
the same journal differently. Only native entries count: a missing owner or generation on a row
is never evidence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from shared.continuity.admissibility_facts import ActionFacts, BoundRequest, Consumed, Situation
from shared.continuity.journal_closure import StoredRow, row_payload

#: The never-claimed workflow's stored name.
NEVER_CLAIMED = "never_claimed"

#: Kinds that witness a recovery action (each names its workflow).
WITNESS_KINDS = frozenset({"recovery_witness", "readonly_observation_recovery"})
#: Kinds that may follow a failure without keeping the request held.
ACCOUNTED_AFTER_FAILURE = frozenset({"startup_recovery_annotation"})


class JournalRow(StoredRow, Protocol):
    """What the reader needs of a journal entry (the ledger's and the candidate's both fit)."""

    @property
    def actor(self) -> str: ...


@dataclass(frozen=True)
class RequestHistory:
    """What the journal proves about one admitted request."""

    request_id: str
    execution_request_id: str
    #: The actor of the migration settlement: the ticket's original operator.
    original_actor: str
    settlement_sequence: int
    claim_sequence: int
    #: Sequences of worker_claimed entries for the execution request.
    worker_claims: tuple[int, ...]
    #: Sequence of the request_failed entry (or the request_event "expired") at generation 0
    #: recorded before any claim; 0 if none.
    unclaimed_failure_sequence: int
    #: Entries after that failure that nothing accounts for.
    unaccounted_after_failure: tuple[int, ...]
    #: Recovery identifiers witnessed for the request, by workflow.
    witnessed: tuple[tuple[str, str], ...]
    #: Tool calls whose durable outcome is unknown.
    unknown_outcomes: tuple[str, ...]
    #: The settlement's derived checkpoint: the checkpoint the request resumes from.
    derived_checkpoint_digest: str = ""
    #: (sequence, generation) of request_failed entries recorded after a worker claim.
    claimed_failures: tuple[tuple[int, int], ...] = ()
    #: Generations of the worker claims, in order.
    claim_generations: tuple[int, ...] = ()
    #: (sequence, payload) of provider requests retained for the execution request.
    provider_requests: tuple[tuple[int, dict[str, object]], ...] = ()
    #: (sequence, kind) of every entry after the ownership claim, in order.
    after_claim: tuple[tuple[int, str], ...] = ()

    @property
    def found(self) -> bool:
        return self.claim_sequence > 0

    def spent_by(self, workflow: str) -> tuple[str, ...]:
        return tuple(recovery for flow, recovery in self.witnessed if flow == workflow)

    def known_effects(self) -> tuple[tuple[str, int], ...]:
        effects = [
            (
                f"request {self.request_id} admitted (migration settlement)",
                self.settlement_sequence,
            ),
            (f"execution request {self.execution_request_id} queued", self.claim_sequence),
        ]
        effects += [(f"worker claimed {self.execution_request_id}", s) for s in self.worker_claims]
        if self.unclaimed_failure_sequence:
            effects.append(
                (
                    f"{self.execution_request_id} failed before any claim",
                    self.unclaimed_failure_sequence,
                )
            )
        return tuple(sorted(effects, key=lambda effect: effect[1]))


def request_history(rows: Iterable[JournalRow], request_id: str) -> RequestHistory:
    """The history of ``request_id`` in one run's journal (rows in sequence order)."""
    ordered = sorted(rows, key=lambda row: row.sequence)
    execution_request_id, actor, settlement, claim = "", "", 0, 0
    claims: list[int] = []
    failure = 0
    witnessed: list[tuple[str, str]] = []
    unknown: dict[str, str] = {}
    derived = ""
    generations: list[int] = []
    claimed_failures: list[tuple[int, int]] = []
    provider_requests: list[tuple[int, dict[str, object]]] = []
    for row in ordered:
        payload = row_payload(row)
        if row.kind == "tool_outcome" and isinstance(payload.get("call_id"), str):
            unknown[str(payload["call_id"])] = str(payload.get("status", ""))
        if row.kind == "migration_settlement" and payload.get("request_id") == request_id:
            settlement, actor = row.sequence, row.actor
            derived = str(payload.get("derived_checkpoint_digest", ""))
        elif row.kind == "ownership_claim" and payload.get("request_id") == request_id:
            claim, execution_request_id = row.sequence, str(payload.get("execution_request_id", ""))
        elif row.kind in WITNESS_KINDS and payload.get("request_id") == request_id:
            witnessed.append((str(payload.get("workflow")), str(payload.get("recovery_id"))))
        elif (
            not execution_request_id or payload.get("execution_request_id") != execution_request_id
        ):
            continue
        elif row.kind == "worker_claimed":
            claims.append(row.sequence)
            generations.append(_generation(payload))
        elif row.kind == "model_request_sent":
            provider_requests.append((row.sequence, payload))
        elif row.kind == "request_failed" and claims:
            claimed_failures.append((row.sequence, _generation(payload)))
        elif (
            row.kind in ("request_failed", "request_event")
            and (row.kind == "request_failed" or payload.get("event") == "expired")
            and not claims
            and not failure
            and payload.get("lease_generation") == 0
        ):
            # the unclaimed end: a failure before any claim, or the lease's expiry unclaimed
            failure = row.sequence
    unaccounted = tuple(
        row.sequence
        for row in ordered
        if failure and row.sequence > failure and row.kind not in ACCOUNTED_AFTER_FAILURE
    )
    return RequestHistory(
        request_id=request_id,
        execution_request_id=execution_request_id,
        original_actor=actor,
        settlement_sequence=settlement,
        claim_sequence=claim,
        worker_claims=tuple(claims),
        unclaimed_failure_sequence=failure,
        unaccounted_after_failure=unaccounted,
        witnessed=tuple(witnessed),
        unknown_outcomes=tuple(sorted(c for c, status in unknown.items() if status == "unknown")),
        derived_checkpoint_digest=derived,
        claimed_failures=tuple(claimed_failures),
        claim_generations=tuple(generations),
        provider_requests=tuple(provider_requests),
        after_claim=tuple(
            (row.sequence, row.kind) for row in ordered if claim and row.sequence > claim
        ),
    )


def _generation(payload: dict[str, object]) -> int:
    value = payload.get("lease_generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def consumed_from(
    rows: Iterable[JournalRow], command_limit: int, deadline_remaining_seconds: int
) -> Consumed:
    """Resources already charged, counted from retained native rows (never reset)."""
    responses = tool_calls = 0
    commands: set[str] = set()
    for row in rows:
        if row.kind == "response_consumed":
            responses += 1
        elif row.kind == "tool_call_granted":
            tool_calls += 1
        elif row.kind == "command_executed":
            commands.add(str(row_payload(row).get("command_id", "")))
    return Consumed(responses, tool_calls, len(commands), command_limit, deadline_remaining_seconds)


def recovery_facts(
    history: RequestHistory,
    workflow: str,
    action: str,
    situation: Situation,
) -> ActionFacts:
    """The admissibility facts every recovery workflow reads from ``history``'s request; each
    workflow's builder adds what its own evidence settles."""
    return ActionFacts(
        workflow=workflow,
        action=action,
        bound=BoundRequest(
            request_id=history.request_id,
            execution_request_id=history.execution_request_id,
            state=situation.state,
            claimed=bool(history.worker_claims),
            failed_unclaimed=False,
        ),
        spent_by=history.spent_by(workflow),
        workflow_enabled=situation.workflow_enabled,
        actor=situation.actor,
        original_actor=history.original_actor,
        actor_has_authority=situation.actor_has_authority,
        outstanding=tuple(o for o in situation.outstanding if o != history.execution_request_id),
        uncertain=history.unknown_outcomes,
        known_effects=history.known_effects(),
        consumed=situation.consumed,
    )


def never_claimed_facts(
    history: RequestHistory,
    situation: Situation,
    *,
    workflow: str = NEVER_CLAIMED,
    action: str = "request_invalid_read_recovery",
) -> ActionFacts:
    """The admissibility facts of the never-claimed recovery of ``history``'s request (or of a
    workflow that proves the same failure before any claim under its own name)."""
    facts = recovery_facts(history, workflow, action, situation)
    return replace(
        facts,
        bound=replace(facts.bound, failed_unclaimed=history.unclaimed_failure_sequence > 0),
        unaccounted_sequences=history.unaccounted_after_failure,
    )
