"""Reviewing a claimed request whose owner was lost (docs/adr/0010-reconciliation.md): the
read-only inspection, the deployment verifier's recorded proof, and the snapshot and admissibility
facts the decision transaction (``reconciliation.py``) reads again inside its transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta

from sqlalchemy import Connection

from services.ledger.domain.execution import (
    PENDING_STATES,
    ExecutionRequestRecord,
    RequestState,
)
from services.ledger.domain.journal import EntryKind
from services.ledger.domain.reconciliation import (
    MAX_VERIFICATION_SECONDS,
    Snapshot,
    Verification,
    VerifyInput,
    bound_request,
    budget_problems,
    build_snapshot,
    verification_problems,
)
from services.ledger.domain.runs import Run, check_identifier
from services.ledger.domain.verifier import (
    ReconciliationVerifier,
    VerificationProof,
    VerificationSubject,
)
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository import journal_reads
from services.ledger.repository import policy as policy_rows
from services.ledger.repository import reconciliations as reconciliation_rows
from services.ledger.transactions.base import (
    LedgerContext,
    append_entry,
    existing_run,
    retry_on_unique_conflict,
)
from shared.continuity.admissibility import check
from shared.continuity.admissibility_facts import (
    RETRY_STAGE,
    ActionFacts,
    Outcome,
    ReconciliationFacts,
)
from shared.continuity.timeutil import deadline_remaining_seconds, to_text
from shared.runtime.errors import FailedPrecondition, NotFound, PreconditionViolation

#: The role a reconciliation decision and a verification request need, asked again now.
RECONCILIATION_ROLE = "factory_administrator"
WORKFLOW = "reconciliation"
Authority = Callable[[str], frozenset[str]]


@dataclass(frozen=True)
class Inspection:
    """A snapshot with the holds a RETRY_STAGE would meet now."""

    snapshot: Snapshot
    outcome: Outcome


def request_of_run(
    connection: Connection, run_id: str, execution_request_id: str, *, for_update: bool = False
) -> ExecutionRequestRecord:
    record = request_rows.get_execution_request(
        connection, execution_request_id, for_update=for_update
    )
    if record is None or record.run_id != run_id:
        raise NotFound(
            "EXECUTION_REQUEST_NOT_FOUND",
            f"no execution request {execution_request_id} in run {run_id}",
            metadata={"execution_request_id": execution_request_id},
        )
    return record


def snapshot_of(
    context: LedgerContext,
    connection: Connection,
    run: Run,
    record: ExecutionRequestRecord,
    reconciliation_id: str,
) -> Snapshot:
    chain = [
        r
        for r in request_rows.list_execution_requests(connection, run.spec.run_id)
        if r.request_id == record.request_id
    ]
    return build_snapshot(
        record,
        chain,
        journal_reads.iter_journal(connection, run.spec.run_id),
        command_limit=run.spec.command_limit,
        deadline_remaining_seconds=deadline_remaining_seconds(
            run.spec.active_deadline_at, context.clock()
        ),
        reconciliation_id=reconciliation_id,
    )


def facts_of(
    connection: Connection,
    snapshot: Snapshot,
    *,
    decision: str,
    actor: str,
    actor_has_authority: bool,
    workflow_enabled: bool,
    now_problems: tuple[tuple[str, ...], Verification | None],
    cessation_unproven_acknowledged: bool = False,
) -> ActionFacts:
    """The admissibility facts of a decision on ``snapshot``, read now."""
    problems, verification = now_problems
    record = snapshot.record
    spent = reconciliation_rows.get_for_execution_request(connection, record.execution_request_id)
    outstanding = tuple(
        r.execution_request_id
        for r in request_rows.list_execution_requests(connection, record.run_id, PENDING_STATES)
        if r.execution_request_id != record.execution_request_id
    )
    return ActionFacts(
        workflow=WORKFLOW,
        action=decision,
        bound=bound_request(snapshot, cessation_verified=verification is not None),
        spent_by=() if spent is None else (spent.reconciliation_id,),
        workflow_enabled=workflow_enabled,
        actor=actor,
        original_actor=actor,
        actor_has_authority=actor_has_authority,
        outstanding=outstanding,
        unaccounted_sequences=snapshot.unrelated,
        uncertain=snapshot.uncertain,
        known_effects=snapshot.known_effects(),
        consumed=snapshot.consumed,
        reconciliation=ReconciliationFacts(
            decision, problems, budget_problems(snapshot), cessation_unproven_acknowledged
        ),
    )


# --- inspection -----------------------------------------------------------------------------------


def inspect(
    context: LedgerContext,
    authority: Authority,
    run_id: str,
    execution_request_id: str,
    reconciliation_id: str,
    actor: str,
) -> Inspection:
    """The read-only snapshot, with the admissibility check of a RETRY_STAGE by ``actor`` now."""
    for name, value in (
        ("run_id", run_id),
        ("execution_request_id", execution_request_id),
        ("reconciliation_id", reconciliation_id),
    ):
        check_identifier(name, value)
    with context.read() as connection:
        run = existing_run(connection, run_id)
        record = request_of_run(connection, run_id, execution_request_id)
        snapshot = snapshot_of(context, connection, run, record, reconciliation_id)
        policy = policy_rows.current_policy(connection)
        facts = facts_of(
            connection,
            snapshot,
            decision=RETRY_STAGE,
            actor=actor,
            actor_has_authority=RECONCILIATION_ROLE in authority(actor),
            workflow_enabled=policy.settings.enabled,
            now_problems=verification_problems(snapshot, context.clock()),
        )
        return Inspection(snapshot, check(facts))


# --- verification ---------------------------------------------------------------------------------


def stale_digest(given: str, current: str) -> FailedPrecondition:
    return FailedPrecondition(
        "RECONCILIATION_DIGEST_STALE",
        "the request's snapshot moved since the inspection; inspect and review again",
        metadata={"current_reconciliation_digest": current},
        precondition_violations=[
            PreconditionViolation("RECONCILIATION_DIGEST", "reconciliation_digest", given)
        ],
    )


def verify(
    context: LedgerContext,
    authority: Authority,
    verifier: ReconciliationVerifier,
    request: VerifyInput,
) -> Verification:
    """Ask the deployment verifier about the inspected snapshot; record a complete proof only."""
    request.validate()
    _require_authority(authority, request.actor, request.execution_request_id)
    with context.read() as connection:
        run = existing_run(connection, request.run_id)
        record = request_of_run(connection, request.run_id, request.execution_request_id)
        snapshot = snapshot_of(context, connection, run, record, request.reconciliation_id)
    if snapshot.digest != request.reconciliation_digest:
        raise stale_digest(request.reconciliation_digest, snapshot.digest)
    if record.state is not RequestState.CLAIMED:
        # only a claimed request has an owner whose cessation could be proven
        raise FailedPrecondition(
            "RECONCILIATION_UNRESOLVED",
            f"the request is {record.state.value}; only a claimed request is verified",
            metadata={
                "holds": "REQUEST_NOT_CLAIMED",
                "execution_request_id": record.execution_request_id,
            },
            precondition_violations=[
                PreconditionViolation(
                    "REQUEST_NOT_CLAIMED", record.execution_request_id, record.state.value
                )
            ],
        )
    # The verifier may observe the outside world; it runs outside any database transaction.
    try:
        proof = verifier.verify(
            VerificationSubject(snapshot, request.evidence_reference, request.actor)
        )
        detail, complete = proof.detail, proof.complete
    except Exception as error:  # noqa: BLE001 - a failing verifier proves nothing
        detail, complete = f"the verifier failed: {type(error).__name__}", False
    if not complete:
        raise FailedPrecondition(
            "RECONCILIATION_NOT_VERIFIED",
            f"verifier {verifier.name} did not prove cessation, bounded exposure and no effect "
            f"or retry-safe: {detail}",
            metadata={
                "verifier": verifier.name,
                "execution_request_id": record.execution_request_id,
            },
        )
    return _record_verification(context, run, request, snapshot, verifier.name, proof)


@retry_on_unique_conflict
def _record_verification(
    context: LedgerContext,
    run: Run,
    request: VerifyInput,
    snapshot: Snapshot,
    verifier_name: str,
    proof: VerificationProof,
) -> Verification:
    """Append the proof if the snapshot is still the verified one (a concurrent append to the
    run's journal fires the head constraint; the retry re-reads everything)."""
    with context.engine.begin() as connection:
        # the snapshot must still be the one verified; a late write of the old owner moves it
        record = request_of_run(
            connection, request.run_id, request.execution_request_id, for_update=True
        )
        again = snapshot_of(context, connection, run, record, request.reconciliation_id)
        if again.digest != snapshot.digest:
            raise stale_digest(request.reconciliation_digest, again.digest)
        now = context.clock()
        seconds = min(proof.valid_for_seconds, MAX_VERIFICATION_SECONDS)
        verification = Verification(
            reconciliation_id=request.reconciliation_id,
            execution_request_id=record.execution_request_id,
            reconciliation_digest=snapshot.digest,
            verifier=verifier_name,
            cessation_verified=True,
            exposure_within_reservation=True,
            effect=proof.effect,
            evidence_reference=request.evidence_reference,
            sequence=0,
            verified_at="",
            expires_at=to_text(now + timedelta(seconds=seconds)),
            requested_by=request.actor,
            detail=proof.detail,
        )
        entry = append_entry(
            context,
            connection,
            request.run_id,
            EntryKind.RECONCILIATION_VERIFICATION,
            verification.payload(),
            request.actor,
        )
        return replace(verification, sequence=entry.sequence, verified_at=entry.recorded_at)


def _require_authority(authority: Authority, actor: str, execution_request_id: str) -> None:
    if RECONCILIATION_ROLE not in authority(actor):
        raise FailedPrecondition(
            "RECONCILIATION_UNRESOLVED",
            f"{actor} lacks current factory administrator authority",
            metadata={"holds": "AUTHORITY_MISSING", "execution_request_id": execution_request_id},
            precondition_violations=[
                PreconditionViolation("AUTHORITY_MISSING", actor, "factory administrator")
            ],
        )
