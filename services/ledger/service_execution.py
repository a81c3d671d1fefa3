"""The ledger facade's execution requests and commands: listing and reading requests, and the
worker's claim, commands, completion and finish, and a cancellation. Each method delegates to its
transaction module and leaves one event line per committed change."""

from __future__ import annotations

from datetime import datetime

from services.ledger.domain.commands import RecordedCommand
from services.ledger.domain.completion import Completion, GoalClaim
from services.ledger.domain.execution import ExecutionRequestRecord, RequestState, WorkerSource
from services.ledger.domain.journal import StoredEntry, check_reason
from services.ledger.domain.owner_instance import OwnerInstance
from services.ledger.service_base import LedgerBase, request_event
from services.ledger.transactions import completion, execution, execution_stops
from services.ledger.transactions.refusal_handoff import BoundAction
from shared.runtime.events import record_event


class ExecutionRequests(LedgerBase):
    """Execution requests and the commands charged under their leases."""

    def list_execution_requests(
        self, run_id: str, states: tuple[RequestState, ...]
    ) -> tuple[list[ExecutionRequestRecord], datetime]:
        """The run's requests and the ledger's time of the read (on the ledger's clock,
        ADR 0057)."""
        return execution.list_for_run(self._context, run_id, states)

    def get_execution_request(self, execution_request_id: str) -> ExecutionRequestRecord:
        return execution.get(self._context, execution_request_id)

    def read_execution_request(
        self, execution_request_id: str
    ) -> tuple[ExecutionRequestRecord, datetime]:
        """The request and the ledger's time of the read (on the ledger's clock, ADR 0057)."""
        return execution.read_with_time(self._context, execution_request_id)

    def cancel_execution_request(
        self, execution_request_id: str, actor: str, reason: str
    ) -> ExecutionRequestRecord:
        check_reason(reason)
        # a repeat reads the cancelled request back and changes nothing: no second line
        repeat = execution.get(self._context, execution_request_id).state is RequestState.CANCELLED
        bound = BoundAction("cancel_execution_request", actor, execution_request_id)
        with self._handing_off(bound):
            cancelled = execution_stops.cancel(
                self._context, self._authority, execution_request_id, actor, reason
            )
        if not repeat:
            request_event("cancellation", actor, cancelled)
        return cancelled

    def claim(
        self,
        execution_request_id: str,
        worker: str,
        presented: WorkerSource,
        owner_instance: OwnerInstance | None = None,
    ) -> tuple[ExecutionRequestRecord, StoredEntry]:
        """The claimed request and its ``worker_claimed`` entry."""
        bound = BoundAction("claim_execution_request", worker, execution_request_id)
        with self._handing_off(bound):
            claimed, entry = execution.claim(
                self._context,
                self._authority,
                execution_request_id,
                worker,
                presented,
                owner_instance,
            )
        request_event("claim", worker, claimed)
        return claimed, entry

    def complete(
        self,
        execution_request_id: str,
        worker: str,
        generation: int,
        goal_claim: GoalClaim,
        final_output_digest: str = "",
        presented: WorkerSource | None = None,
    ) -> tuple[ExecutionRequestRecord, Completion]:
        with self._handing_off(
            BoundAction("complete_execution_request", worker, execution_request_id)
        ):
            record, done = completion.complete(
                self._context,
                self._authority,
                execution_request_id,
                worker,
                generation,
                goal_claim,
                final_output_digest,
                presented,
            )
        request_event("completion", worker, record, journal_sequence=done.journal_sequence)
        return record, done

    def finish(
        self,
        execution_request_id: str,
        worker: str,
        generation: int,
        outcome: RequestState,
        reason: str = "",
        presented: WorkerSource | None = None,
    ) -> ExecutionRequestRecord:
        check_reason(reason)
        bound = BoundAction("finish_execution_request", worker, execution_request_id)
        with self._handing_off(bound):
            finished = execution.finish(
                self._context, execution_request_id, worker, generation, outcome, reason, presented
            )
        request_event("finish", worker, finished)
        return finished

    def fail_unclaimed(
        self, execution_request_id: str, worker: str, reason: str
    ) -> ExecutionRequestRecord:
        check_reason(reason)
        with self._handing_off(
            BoundAction("fail_unclaimed_execution_request", worker, execution_request_id)
        ):
            failed = execution.fail_unclaimed(self._context, execution_request_id, worker, reason)
        request_event("failure_unclaimed", worker, failed)
        return failed

    def record_command(
        self,
        execution_request_id: str,
        worker: str,
        generation: int,
        command_id: str,
        command_digest: str,
        presented: WorkerSource | None = None,
    ) -> RecordedCommand:
        with self._handing_off(BoundAction("record_command", worker, execution_request_id)):
            recorded = execution.record_command(
                self._context,
                self._authority,
                execution_request_id,
                worker,
                generation,
                command_id,
                command_digest,
                presented,
            )
        if recorded.charged:
            record_event(
                "command",
                actor=worker,
                outcome=f"charged {recorded.used} of {recorded.limit}",
                execution_request_id=execution_request_id,
                lease_generation=generation,
                command_id=command_id,
            )
        return recorded

    def command_usage(self, run_id: str) -> tuple[int, int]:
        return execution.command_usage(self._context, run_id)
