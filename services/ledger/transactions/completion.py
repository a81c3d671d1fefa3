"""A worker completes its claimed request (12): one transaction that records both verdicts, the
worker's goal claim and the ledger's certification, in the completion's journal entry, and
advances the run's completed-round count only when the journal certifies safe completion."""

from __future__ import annotations

from services.ledger.domain.completion import (
    CERTIFYING_KINDS,
    Completion,
    GoalClaim,
    certify,
    check_final_output_digest,
)
from services.ledger.domain.execution import (
    ExecutionRequestRecord,
    RequestState,
    WorkerSource,
    check_worker_write,
    finished,
)
from services.ledger.domain.journal import EntryKind
from services.ledger.domain.recovery_authority import Authority
from services.ledger.transactions.base import (
    LedgerContext,
    append_entry,
    retry_on_unique_conflict,
)
from services.ledger.transactions.execution_rules import check_fenced_write, lock_for_fenced_write


@retry_on_unique_conflict
def complete(
    context: LedgerContext,
    authority: Authority,
    execution_request_id: str,
    worker: str,
    generation: int,
    goal_claim: GoalClaim,
    final_output_digest: str = "",
    presented: WorkerSource | None = None,
) -> tuple[ExecutionRequestRecord, Completion]:
    """Complete a claimed request under the current generation with both verdicts. A stop
    condition (revocation, a changed source or profile, an unknown effect) refuses it, as it
    refuses every worker write; actor loss does not, a completion dispatches nothing (ADR 0014)."""
    check_final_output_digest(final_output_digest)
    with context.engine.begin() as connection:
        # the lock order of every fenced write: the policy lock, then the request row
        policy, record = lock_for_fenced_write(connection, execution_request_id)
        # 12 claimed, current generation, the caller owns it, the lease is in time
        check_worker_write(record, worker, generation, context.clock())
        # the certification's entries are read with the judged ones, in their one statement,
        # under the request and run locks, from the ticket's ownership claim: every entry naming
        # the request is at or after it, and no kind but CERTIFYING_KINDS moves the answer
        custody, effects = check_fenced_write(
            connection,
            authority,
            policy,
            record,
            presented,
            dispatches=False,
            from_claim=CERTIFYING_KINDS,
        )
        head = effects.head
        certification = certify(
            effects.from_claim,
            execution_request_id,
            generation,
            record.lease_generation,
            effects.payload,  # each row parsed once, by whichever rule reads it first
        )
        # read with the run's lock in this transaction: still the count; a certified completion
        # adds its round with the entry's one update of the run row
        rounds = custody.run.completed_rounds + (1 if certification.certified else 0)
        updated = finished(record, RequestState.COMPLETED, context.now())
        entry = append_entry(
            context,
            connection,
            record.run_id,
            EntryKind.REQUEST_EVENT,
            {
                "execution_request_id": execution_request_id,
                "lease_generation": generation,
                "event": "completed",
                "goal_claim": goal_claim.value,
                **({"final_output_digest": final_output_digest} if final_output_digest else {}),
                "certification": certification.as_payload(),
                "completed_rounds": rounds,
            },
            worker,
            request=updated,
            completed_round=certification.certified,
            head=head,
        )
        return updated, Completion(goal_claim, certification, rounds, entry.sequence)
