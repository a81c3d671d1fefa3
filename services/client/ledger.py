"""The ledger process's reads and the policy write: policy, journal, command usage."""

from __future__ import annotations

from collections.abc import Sequence

from forge.continuity.v1 import common_pb2, execution_pb2, inspection_pb2, ledger_pb2, policy_pb2
from services.client._base import ClientBase, invoke
from services.client._validation import check_identifiers

_JOURNAL_PAGE = 500
_POLICY_PAGE = 500


class LedgerCalls(ClientBase):
    """Policy (read, write, history), the journal and its verification, command usage."""

    # --- policy ------------------------------------------------------------------------------

    def get_policy(self, revision: int = 0) -> common_pb2.Policy:
        """The current policy, or one revision when ``revision`` > 0."""
        return invoke(self._policy.GetPolicy, policy_pb2.GetPolicyRequest(revision=revision)).policy

    def put_policy(
        self,
        expected_revision: int,
        *,
        enabled: bool,
        window_seconds: int,
        per_run_ticket_limit: int = 0,
        pending_ticket_limit: int = 0,
        allow_unavailable_source_observations: bool = False,
        allow_pre_admission_recovery: bool = False,
        allow_readonly_observation_recovery: bool = False,
    ) -> common_pb2.Policy:
        """Write the next revision; every setting is replaced (limits of 0 keep the defaults of
        50 per run and 500 pending). ``expected_revision`` is the revision you read: a stale one
        is ``Aborted`` (POLICY_REVISION_STALE). Factory administrators only."""
        settings = common_pb2.PolicySettings(
            enabled=enabled,
            window_seconds=window_seconds,
            per_run_ticket_limit=per_run_ticket_limit,
            pending_ticket_limit=pending_ticket_limit,
            allow_unavailable_source_observations=allow_unavailable_source_observations,
            allow_pre_admission_recovery=allow_pre_admission_recovery,
            allow_readonly_observation_recovery=allow_readonly_observation_recovery,
        )
        request = policy_pb2.PutPolicyRequest(
            expected_revision=expected_revision, settings=settings
        )
        return invoke(self._policy.PutPolicy, request).policy

    def policy_revisions(self) -> list[common_pb2.Policy]:
        """Every policy revision, newest first."""
        revisions: list[common_pb2.Policy] = []
        before = 0
        while True:
            page = invoke(
                self._policy.ListPolicyRevisions,
                policy_pb2.ListPolicyRevisionsRequest(
                    page_size=_POLICY_PAGE, before_revision=before
                ),
            ).policies
            revisions.extend(page)
            if len(page) < _POLICY_PAGE or page[-1].revision <= 1:
                return revisions
            before = page[-1].revision

    # --- journal and commands ----------------------------------------------------------------

    def get_run(self, run_id: str) -> ledger_pb2.GetRunResponse:
        """The run's frozen facts, its journal head and the lease window a grant now may carry."""
        check_identifiers(run_id=run_id)
        return invoke(self._ledger.GetRun, ledger_pb2.GetRunRequest(run_id=run_id))

    def journal(self, run_id: str, from_sequence: int = 1) -> list[common_pb2.JournalEntry]:
        """Every journal entry from ``from_sequence`` on, in sequence order (all pages)."""
        check_identifiers(run_id=run_id)
        entries: list[common_pb2.JournalEntry] = []
        sequence = from_sequence
        while True:
            page = invoke(
                self._ledger.ReadJournal,
                ledger_pb2.ReadJournalRequest(
                    run_id=run_id, from_sequence=sequence, page_size=_JOURNAL_PAGE
                ),
            )
            entries.extend(page.entries)
            if not page.entries or page.next_sequence <= sequence:
                return entries
            sequence = page.next_sequence

    def verify_journal(self, run_id: str) -> ledger_pb2.VerifyJournalResponse:
        """The ledger's recomputation of the run's whole hash chain."""
        check_identifiers(run_id=run_id)
        return invoke(self._ledger.VerifyJournal, ledger_pb2.VerifyJournalRequest(run_id=run_id))

    def inspect_journal(self, run_id: str) -> inspection_pb2.InspectJournalResponse:
        """Inspect the run's canonical records under the current reader and credential guards:
        checks per record, credential findings by location and kind (never the value), every
        field kept with credentials redacted. Returns no resumable SDK object and authorizes
        nothing; a refused inspection (broken chain or native row) raises ``FailedPrecondition``."""
        check_identifiers(run_id=run_id)
        request = inspection_pb2.InspectJournalRequest(run_id=run_id)
        return invoke(self._ledger.InspectJournal, request)

    # --- execution requests ------------------------------------------------------------------

    def execution_requests(
        self, run_id: str, states: Sequence[common_pb2.ExecutionRequestState.ValueType] = ()
    ) -> list[common_pb2.ExecutionRequest]:
        """The run's execution requests (in ``states``; all when empty), oldest first, each with
        its current state and whether a native admission refusal made it ineligible for
        automatic scheduling."""
        check_identifiers(run_id=run_id)
        request = execution_pb2.ListExecutionRequestsRequest(run_id=run_id, states=states)
        return list(invoke(self._execution.ListExecutionRequests, request).execution_requests)

    def list_runs(
        self, *, filter_text: str = "", page_size: int = 0, page_token: str = ""
    ) -> ledger_pb2.ListRunsResponse:
        """One page of runs with their continuity state, newest update first.
        ``filter_text`` is the AIP-160 subset of ADR 0022 (``state = held``, ``held = true``,
        ``admitted = true``, ``unresolved = true``, ``updated_at > "2026-12-01T00:00:00Z"``,
        ``run_id = run-1*``, joined by AND); pass the response's ``next_page_token`` for the
        next page (same filter). Page size 0 is 50, at most 500."""
        request = ledger_pb2.ListRunsRequest(
            filter=filter_text, page_size=page_size, page_token=page_token
        )
        return invoke(self._ledger.ListRuns, request)

    def list_all_execution_requests(
        self, *, filter_text: str = "", page_size: int = 0, page_token: str = ""
    ) -> execution_pb2.ListAllExecutionRequestsResponse:
        """One page of execution requests across every run, newest update first. ``filter_text``:
        ``state = queued`` (short or full state names), ``unresolved = true``, ``run_id = …``,
        ``updated_at > "…"``, joined by AND. Paging as :meth:`list_runs`."""
        request = execution_pb2.ListAllExecutionRequestsRequest(
            filter=filter_text, page_size=page_size, page_token=page_token
        )
        return invoke(self._execution.ListAllExecutionRequests, request)

    def cancel_execution_request(
        self, execution_request_id: str, reason: str
    ) -> common_pb2.ExecutionRequest:
        """Cancel a queued or claimed request (terminal, every lease generation fenced). The
        operator who admitted it, with current authority, or a factory administrator; cancelling
        a cancelled request reads it back."""
        check_identifiers(execution_request_id=execution_request_id)
        request = execution_pb2.CancelExecutionRequestRequest(
            execution_request_id=execution_request_id, reason=reason
        )
        return invoke(self._execution.CancelExecutionRequest, request).execution_request

    def expire_execution_requests(self) -> list[common_pb2.ExecutionRequest]:
        """Move every queued request whose lease ran out to expired; returns what this call
        expired. Workers and factory administrators."""
        request = execution_pb2.ExpireExecutionRequestsRequest()
        return list(invoke(self._execution.ExpireExecutionRequests, request).expired)

    def command_usage(self, run_id: str) -> execution_pb2.CommandUsage:
        """Commands charged to the run (from retained native rows) and its original limit."""
        check_identifiers(run_id=run_id)
        request = execution_pb2.GetCommandUsageRequest(run_id=run_id)
        return invoke(self._execution.GetCommandUsage, request).usage
