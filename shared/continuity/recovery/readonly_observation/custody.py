"""A consumed turn with an unavailable evidence observation (the read-only observation recovery;
ADR 0009).

The supported native history only: the complete earlier claim and provider-refusal recovery
(refusal settlement, its witness and requeue), then one worker claim whose retained provider
request was built from the ticket's derived checkpoint, one consumed response, and exact pure-read
custody for each of its calls — one ``read_run_evidence`` call whose durable outcome is unknown
(its result was not retained) and at most one ``list_files`` call with its exact retained
successful result, each granted as a read with its arguments' digest and the run's source cut
(``shared.continuity.call_binding``), with its durable intent —
and the failure under that claim's generation. Nothing else may follow the claim: a writable,
command, network or unsupported call, a second response, a command or a stored checkpoint stays
held. The spent provider-refusal action authorizes nothing here: this workflow has its own
one-use action and its own administrator decision.

The candidate service and the ledger both judge the journal with ``observation_custody`` and
build the admissibility facts with ``readonly_observation_facts``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from shared.continuity.admissibility_facts import ActionFacts, Situation
from shared.continuity.call_binding import READ_GRANT, grant_problems
from shared.continuity.canonical import is_digest
from shared.continuity.journal_closure import row_payload
from shared.continuity.recovery.rejected_boundary.custody import REJECTED_BOUNDARY
from shared.continuity.request_history import JournalRow, RequestHistory, recovery_facts

#: The read-only observation workflow's stored name.
READONLY_OBSERVATION = "readonly_observation"
EVIDENCE_TOOL = "read_run_evidence"
RETAINED_TOOLS = frozenset({"list_files"})
#: The roles the original actor must hold now, at the candidate and again at commit.
REQUIRED_ROLES = frozenset({"factory_administrator", "execution_operator"})


@dataclass(frozen=True)
class ObservationCustody:
    """What the journal proves about the consumed turn after the refusal recovery."""

    problems: tuple[str, ...]
    #: The derived checkpoint the consumed request was sent from.
    pending_checkpoint_digest: str = ""
    consumed_response_digest: str = ""
    consumed_at: str = ""
    #: (call id, tool name) of the granted calls, in journal order.
    calls: tuple[tuple[str, str], ...] = ()
    evidence_call_id: str = ""
    #: call id → digest of its exact retained successful result (list_files only).
    retained: dict[str, str] = field(default_factory=dict)
    #: call id → the argument digest its grant row records (compared at commit with the
    #: arguments of the consumed response the derived checkpoint carries).
    args_digests: dict[str, str] = field(default_factory=dict)
    #: Sequence of the failure under the consuming claim.
    failed_sequence: int = 0


@dataclass
class _Turn:
    """The consumed turn's native rows after the refusal recovery's requeue, collected in order;
    every row nothing here accounts for is a problem."""

    execution_request_id: str
    generation: int
    problems: list[str] = field(default_factory=list)
    sent: dict[str, object] | None = None
    consumed: dict[str, object] | None = None
    failed: int = 0
    granted: dict[str, tuple[str, dict[str, object]]] = field(default_factory=dict)
    intents: set[str] = field(default_factory=set)
    outcomes: dict[str, dict[str, object]] = field(default_factory=dict)

    def _own(self, payload: dict[str, object]) -> bool:
        return payload.get("execution_request_id") == self.execution_request_id

    def take(self, row: JournalRow) -> None:
        payload, kind = row_payload(row), row.kind
        call_id = str(payload.get("call_id", ""))
        if kind == "worker_claimed" and self._own(payload):
            return
        if kind == "model_request_sent" and self.sent is None:
            self.sent = payload
        elif kind == "response_consumed" and self.sent is not None and self.consumed is None:
            self.consumed = payload
        elif kind == "tool_call_granted" and self.consumed is not None and not self.failed:
            if call_id in self.granted:
                self.problems.append(f"journal entry {row.sequence}: {call_id} granted twice")
            self.granted[call_id] = (str(payload.get("tool_name", "")), payload)
        elif kind == "tool_intent" and call_id in self.granted:
            self.intents.add(call_id)
        elif kind == "tool_outcome" and call_id in self.intents:
            self.outcomes[call_id] = payload
        elif (
            kind == "request_failed"
            and not self.failed
            and self._own(payload)
            and payload.get("lease_generation") == self.generation
        ):
            self.failed = row.sequence
        elif kind != "startup_recovery_annotation":
            self.problems.append(
                f"journal entry {row.sequence} ({kind}) is not accounted for by read custody"
            )

    def call_problems(self, source_revision: str) -> tuple[list[str], dict[str, str]]:
        """Each call's custody: a pure read, granted as a read with its arguments' digest at the
        run's source cut, a durable intent, and the evidence outcome unknown or the list result
        retained."""
        problems: list[str] = []
        retained: dict[str, str] = {}
        for call_id, (name, grant) in self.granted.items():
            if name != EVIDENCE_TOOL and name not in RETAINED_TOOLS:
                problems.append(f"call {call_id} ({name}) is not a pure read observation")
                continue
            problems += grant_problems(
                call_id, grant, source_revision=source_revision, grant=READ_GRANT
            )
            if call_id not in self.intents:
                problems.append(f"call {call_id} has no durable intent")
            outcome = self.outcomes.get(call_id) or {}
            digest = str(outcome.get("result_digest", ""))
            if name == EVIDENCE_TOOL:
                if outcome.get("status") != "unknown":
                    problems.append(f"the evidence call {call_id} has no durable unknown outcome")
            elif outcome.get("status") != "succeeded" or not is_digest(digest):
                problems.append(f"call {call_id} has no retained successful result")
            else:
                retained[call_id] = digest
        return problems, retained


def _requeued_by_refusal(ordered: list[JournalRow], history: RequestHistory) -> int:
    """The sequence of the one provider-refusal recovery's requeue; 0 when there is none."""
    refusals = [s for flow, s in history.witnessed if flow == REJECTED_BOUNDARY]
    if len(refusals) != 1:
        return 0
    return next(
        (
            row.sequence
            for row in ordered
            if row.kind == "request_event"
            and row_payload(row).get("event") == "requeued_by_recovery"
            and row_payload(row).get("recovery_id") == refusals[0]
        ),
        0,
    )


def observation_custody(
    rows: Iterable[JournalRow], history: RequestHistory, source_revision: str
) -> ObservationCustody:
    """Every reason the journal does not prove the supported case (empty: proven);
    ``source_revision`` is the run's registered source, the cut every read must have observed."""
    ordered = sorted(rows, key=lambda row: row.sequence)
    requeue = _requeued_by_refusal(ordered, history)
    if not requeue:
        return ObservationCustody(("the history holds no complete provider-refusal recovery",))
    if len(history.worker_claims) != 2 or history.worker_claims[0] > requeue:
        return ObservationCustody(
            ("the history does not retain exactly one worker claim after the refusal recovery",)
        )
    turn = _Turn(history.execution_request_id, history.claim_generations[-1])
    for row in ordered:
        if row.sequence > requeue:
            turn.take(row)
    sent, consumed, problems = turn.sent, turn.consumed, turn.problems
    if sent is None or consumed is None or not turn.failed:
        problems.append(
            "the history does not retain one provider request, one consumed response and the "
            "failure under the worker's claim"
        )
        return ObservationCustody(tuple(problems))
    checkpoint = history.derived_checkpoint_digest
    if not checkpoint or sent.get("checkpoint_digest") != checkpoint:
        problems.append("the consumed request was not sent from the ticket's derived checkpoint")
    if consumed.get("request_id") != sent.get("request_id"):
        problems.append("the consumed response is not the retained request's")
    response_digest = str(consumed.get("response_digest", ""))
    consumed_at = str(consumed.get("consumed_at", ""))
    if not is_digest(response_digest) or not consumed_at:
        problems.append("the consumed response has no digest or consumption time")
    evidence = [c for c, (name, _) in turn.granted.items() if name == EVIDENCE_TOOL]
    if len(evidence) != 1:
        problems.append(f"{len(evidence)} granted read_run_evidence calls; exactly one qualifies")
    if len(turn.granted) - len(evidence) > 1:
        problems.append("more than one list_files call")
    call_problems, retained = turn.call_problems(source_revision)
    return ObservationCustody(
        problems=tuple(problems + call_problems),
        pending_checkpoint_digest=str(sent.get("checkpoint_digest", "")),
        consumed_response_digest=response_digest,
        consumed_at=consumed_at,
        calls=tuple((call_id, name) for call_id, (name, _) in turn.granted.items()),
        evidence_call_id=evidence[0] if len(evidence) == 1 else "",
        retained=retained,
        args_digests={
            call_id: str(grant.get("args_digest") or "")
            for call_id, (_, grant) in turn.granted.items()
        },
        failed_sequence=turn.failed,
    )


def readonly_observation_facts(
    history: RequestHistory,
    custody: ObservationCustody,
    situation: Situation,
) -> ActionFacts:
    """The admissibility facts of the read-only observation recovery of ``history``'s request.
    Only the proven evidence call's unknown outcome is the one this action explains; any other
    unknown outcome stays uncertain."""
    proven = not custody.problems
    facts = recovery_facts(
        history,
        READONLY_OBSERVATION,
        "request_readonly_observation_recovery",
        situation,
    )
    return replace(
        facts,
        bound=replace(facts.bound, observation_proven=proven),
        required_authority="factory administrator and execution",
        uncertain=tuple(
            call
            for call in history.unknown_outcomes
            if not (proven and call == custody.evidence_call_id)
        ),
        observation_problems=custody.problems,
    )
