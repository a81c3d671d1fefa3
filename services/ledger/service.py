"""The ledger facade the servicers and tests use: one method per transaction, each delegating to
its module under ``services.ledger.transactions``. No rules and no SQL live here. Each committed
state change leaves one event line (``shared.runtime.events``); a replay that wrote nothing
leaves none."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from forge.continuity.v1 import common_pb2
from services.ledger.domain.admission import AdmissionInput
from services.ledger.domain.commands import RecordedCommand
from services.ledger.domain.completion import Completion, GoalClaim
from services.ledger.domain.execution import ExecutionRequestRecord, RequestState, WorkerSource
from services.ledger.domain.journal import EntryKind, StoredEntry, check_reason
from services.ledger.domain.owner_instance import OwnerInstance
from services.ledger.domain.policy import PolicyRevision, PolicySettings
from services.ledger.domain.reconciliation import ReconcileInput, VerifyInput
from services.ledger.domain.reconciliation import Verification as RecordedVerification
from services.ledger.domain.recovery_authority import Authority, no_authority
from services.ledger.domain.runs import Run, RunReading, RunSpec
from services.ledger.domain.signing import HeadSigner, PublishedKey
from services.ledger.domain.verifier import ReconciliationVerifier, RefusingVerifier
from services.ledger.transactions import (
    admission,
    blobs,
    completion,
    execution,
    execution_stops,
    followers,
    inspection,
    journal,
    listing,
    policy,
    reconciliation,
    reconciliation_review,
    recovery,
    runs,
    signed_heads,
    snapshot,
)
from services.ledger.transactions.admission import Admission
from services.ledger.transactions.base import LedgerContext
from services.ledger.transactions.followers import JournalFollowers
from services.ledger.transactions.inspection import JournalInspection
from services.ledger.transactions.journal import JournalPage
from services.ledger.transactions.listing import ExecutionRequestPage, RunPage
from services.ledger.transactions.reconciliation import Reconciled
from services.ledger.transactions.reconciliation_review import Inspection
from services.ledger.transactions.recovery_input import Recovery, RecoveryInput
from services.ledger.transactions.refusal_handoff import BoundAction, handoff_of
from services.ledger.transactions.signed_heads import HeadFeedPage, SignedHeadPage
from shared.continuity.admissibility_facts import REVIEW
from shared.continuity.journal_chain import Verification
from shared.continuity.timeutil import Clock, utc_now
from shared.runtime.config import StreamBounds, stream_bounds
from shared.runtime.errors import DomainError, RefusalDetail
from shared.runtime.events import record_event

T = TypeVar("T")


def _request_event(what: str, actor: str, record: ExecutionRequestRecord, **extra: object) -> None:
    record_event(
        what,
        actor=actor,
        outcome=record.state.value,
        run_id=record.run_id,
        request_id=record.request_id,
        execution_request_id=record.execution_request_id,
        lease_generation=record.lease_generation,
        **extra,
    )


class Ledger:
    """Runs, the hash-chained journal, blobs, policy, admissions and execution requests over one
    SQLAlchemy engine."""

    def __init__(
        self,
        engine: Engine,
        clock: Clock = utc_now,
        *,
        stream_limits: StreamBounds | None = None,
        authority: Authority = no_authority,
        verifier: ReconciliationVerifier | None = None,
        signer: HeadSigner | None = None,
    ) -> None:
        # With a signer, every append signs the head it makes (ADR 0015).
        self._context = LedgerContext(engine, clock, signer)
        # Current roles of an identity, asked inside every recovery transaction.
        self._authority = authority
        # The deployment's reconciliation verifier; the default proves nothing.
        self._verifier = verifier if verifier is not None else RefusingVerifier()
        self.journal_followers = JournalFollowers(
            stream_bounds() if stream_limits is None else stream_limits, self._context
        )

    def _handing_off(self, bound: BoundAction) -> RefusalDetail[common_pb2.HandoffPayload]:
        """Around a continuation action: each refusal by the state carries the handoff of the
        request it was bound to (ADR 0046), read only then."""
        return RefusalDetail(
            common_pb2.HandoffPayload, lambda refused: handoff_of(self._context, refused, bound)
        )

    # --- runs -----------------------------------------------------------------------------------

    def create_run(self, spec: RunSpec, actor: str) -> tuple[Run, bool]:
        run, created = runs.create(self._context, spec, actor)
        if created:
            record_event("run_created", actor=actor, outcome="created", run_id=spec.run_id)
        return run, created

    def get_run(self, run_id: str) -> RunReading:
        return runs.get(self._context, run_id)

    def list_runs(self, page_size: int, page_token: str, filter_text: str) -> RunPage:
        return listing.list_runs(self._context, page_size, page_token, filter_text)

    def list_all_execution_requests(
        self, page_size: int, page_token: str, filter_text: str
    ) -> ExecutionRequestPage:
        return listing.list_execution_requests(self._context, page_size, page_token, filter_text)

    # --- journal --------------------------------------------------------------------------------

    def append(
        self,
        run_id: str,
        expected_head_hash: str,
        kind: EntryKind,
        payload_json: str,
        actor: str,
        *,
        worker: bool = False,
    ) -> StoredEntry:
        """``worker``: the caller appends as a worker (no platform writer role), a fenced write;
        a worker record naming a continuity request is fenced whoever appends it."""
        with self._handing_off(
            BoundAction(f"append_{kind.value}", actor, payload_json=payload_json)
        ):
            return journal.append(
                self._context,
                run_id,
                expected_head_hash,
                kind,
                payload_json,
                actor,
                self._authority,
                worker=worker,
            )

    def read_journal(self, run_id: str, from_sequence: int, page_size: int) -> JournalPage:
        return journal.read(self._context, run_id, from_sequence, page_size)

    def verify(self, run_id: str) -> Verification:
        return journal.verify(self._context, run_id)

    def read_snapshot(
        self, run_id: str, *, caller: str, closure_blobs: bool = False
    ) -> Iterator[snapshot.SnapshotPart]:
        """The streamed snapshot, holding one of ``caller``'s stream slots while it is read."""
        with self.journal_followers.streams.hold(caller):
            yield from snapshot.read(
                self._context, run_id, closure_blobs=closure_blobs, streamed=True
            )

    def read_whole_snapshot(
        self,
        run_id: str,
        *,
        closure_blobs: bool = False,
        known_head: tuple[int, str] | None = None,
    ) -> snapshot.WholeSnapshot:
        return snapshot.read_whole(
            self._context, run_id, closure_blobs=closure_blobs, known_head=known_head
        )

    def inspect_journal(self, run_id: str) -> JournalInspection:
        return inspection.inspect(self._context, run_id)

    def stream_journal(
        self,
        run_id: str,
        from_sequence: int,
        *,
        caller: str,
        follow: bool,
        is_active: Callable[[], bool],
        batch_entries: int = 0,
    ) -> Iterator[list[StoredEntry]]:
        return followers.stream(
            self._context,
            self.journal_followers,
            run_id,
            from_sequence,
            caller=caller,
            follow=follow,
            is_active=is_active,
            batch_entries=batch_entries,
        )

    def wake_followers(self) -> None:
        """A follower's call ended: wake it so it stops at once."""
        self.journal_followers.wake()

    # --- signed heads (ADR 0015) ----------------------------------------------------------------

    def signing_keys(self) -> list[PublishedKey]:
        return signed_heads.published_keys(self._context)

    def read_signed_heads(self, run_id: str, from_sequence: int, page_size: int) -> SignedHeadPage:
        return signed_heads.read(self._context, run_id, from_sequence, page_size)

    def head_feed(self, cursor: str, page_size: int) -> HeadFeedPage:
        return signed_heads.feed(self._context, cursor, page_size)

    # --- blobs ----------------------------------------------------------------------------------

    def put_blob(self, content: bytes, media_type: str, expected_digest: str) -> tuple[str, bool]:
        return blobs.put(self._context, content, media_type, expected_digest)

    def get_blob(self, digest: str) -> tuple[bytes, str]:
        return blobs.get(self._context, digest)

    # --- policy ---------------------------------------------------------------------------------

    def get_policy(self, revision: int) -> PolicyRevision:
        return policy.get(self._context, revision)

    def put_policy(
        self, expected_revision: int, settings: PolicySettings, actor: str
    ) -> PolicyRevision:
        written = policy.put(self._context, expected_revision, settings, actor)
        record_event(
            "policy_written",
            actor=actor,
            outcome="enabled" if written.settings.enabled else "disabled",
            policy_revision=written.revision,
        )
        return written

    def list_policies(self, before_revision: int, page_size: int) -> list[PolicyRevision]:
        return policy.list_revisions(self._context, before_revision, page_size)

    # --- admissions -----------------------------------------------------------------------------

    def _expiring(self, transaction: Callable[[execution_stops.Expiry], T]) -> T:
        """Run one of the transactions that count queued requests (admission, recovery,
        reconciliation) with the expiry sweep as its first step (execution_stops.Expiry): what
        it expired leaves its event lines once committed. A refusal rolled the sweep back with
        the rest; what was due then expires in its own transaction before the refusal travels
        on, so the state a refusal leaves is the one a sweep run first would have left."""
        expiry = execution_stops.Expiry(self._context)
        try:
            result = transaction(expiry)
        except DomainError:
            if expiry.expired:
                self.expire_due()
            raise
        self._expired(expiry.expired)
        return result

    def commit_admission(self, request: AdmissionInput) -> Admission:
        bound = BoundAction(
            "request_invalid_read_continuity",
            request.operator_identity,
            run_id=request.run_id,
            request_id=request.request_id,
            default_requirement=REVIEW,
        )
        with self._handing_off(bound):
            admitted = self._expiring(
                lambda expiry: admission.commit(self._context, request, expiry)
            )
        if admitted.created:
            record = admitted.execution_request
            _request_event(
                "admission",
                request.operator_identity,
                record,
                lease_seconds=record.lease_seconds,
                policy_revision=admitted.ticket.policy_revision,
            )
        return admitted

    def get_admission(self, run_id: str, request_id: str) -> Admission:
        return admission.get(self._context, run_id, request_id)

    # --- recoveries -----------------------------------------------------------------------------

    def commit_recovery(self, request: RecoveryInput) -> Recovery:
        """Any registered recovery workflow (``request.workflow``); one transaction, whose
        first step expires the queued requests whose lease ran out."""
        bound = BoundAction(
            request.workflow,
            request.actor,
            run_id=request.run_id,
            request_id=request.request_id,
            default_requirement=REVIEW,
        )
        with self._handing_off(bound):
            recovered = self._expiring(
                lambda expiry: recovery.commit_recovery(
                    self._context, self._authority, request, expiry
                )
            )
        if recovered.created:
            _request_event(
                f"recovery.{request.workflow}",
                request.actor,
                recovered.execution_request,
                recovery_id=request.recovery_id,
                lease_seconds=recovered.execution_request.lease_seconds,
            )
        return recovered

    def get_recovery(self, run_id: str, request_id: str, workflow: str) -> Recovery:
        return recovery.get(self._context, run_id, request_id, workflow)

    # --- reconciliation of claimed requests whose owner was lost ------------------------------

    def inspect_reconciliation(
        self, run_id: str, execution_request_id: str, reconciliation_id: str, actor: str
    ) -> Inspection:
        return reconciliation_review.inspect(
            self._context, self._authority, run_id, execution_request_id, reconciliation_id, actor
        )

    def verify_reconciliation(self, request: VerifyInput) -> RecordedVerification:
        recorded = reconciliation_review.verify(
            self._context, self._authority, self._verifier, request
        )
        record_event(
            "reconciliation_verification",
            actor=request.actor,
            outcome=recorded.effect or "recorded",
            run_id=request.run_id,
            execution_request_id=request.execution_request_id,
            reconciliation_id=request.reconciliation_id,
            journal_sequence=recorded.sequence,
        )
        return recorded

    def reconcile(self, request: ReconcileInput) -> Reconciled:
        decided = self._expiring(
            lambda expiry: reconciliation.commit(self._context, self._authority, request, expiry)
        )
        if decided.created:
            _request_event(
                f"reconciliation.{request.decision}",
                request.actor,
                decided.reconciled,
                reconciliation_id=request.reconciliation_id,
                retry_execution_request_id=decided.saved.retry_execution_request_id,
            )
        return decided

    def get_reconciliation(self, run_id: str, execution_request_id: str) -> Reconciled:
        return reconciliation.get(self._context, run_id, execution_request_id)

    # --- execution requests and commands --------------------------------------------------------

    def list_execution_requests(
        self, run_id: str, states: tuple[RequestState, ...]
    ) -> list[ExecutionRequestRecord]:
        return execution.list_for_run(self._context, run_id, states)

    def get_execution_request(self, execution_request_id: str) -> ExecutionRequestRecord:
        return execution.get(self._context, execution_request_id)

    def expire_due(self) -> list[ExecutionRequestRecord]:
        """On request, and after a refusal rolled back the sweep inside a transaction that counts
        queued requests (``_expiring``): expired queued requests free their place (a sweep that
        loses a race runs again next time). A claim of an expired request is refused
        (LEASE_EXPIRED) and writes nothing."""
        try:
            expired = execution_stops.expire_due(self._context)
        except IntegrityError:
            return []
        self._expired(expired)
        return expired

    def sweep_expired(self) -> list[ExecutionRequestRecord]:
        """The scheduled sweep (``services.ledger.expiry_sweep``): as :meth:`expire_due`, by one
        replica at a time."""
        try:
            expired = execution_stops.sweep_on_schedule(self._context)
        except IntegrityError:
            return []
        self._expired(expired)
        return expired

    @staticmethod
    def _expired(expired: list[ExecutionRequestRecord]) -> None:
        for record in expired:
            _request_event("expiry", "ledger", record)

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
            _request_event("cancellation", actor, cancelled)
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
        _request_event("claim", worker, claimed)
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
        _request_event("completion", worker, record, journal_sequence=done.journal_sequence)
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
        _request_event("finish", worker, finished)
        return finished

    def fail_unclaimed(
        self, execution_request_id: str, worker: str, reason: str
    ) -> ExecutionRequestRecord:
        check_reason(reason)
        with self._handing_off(
            BoundAction("fail_unclaimed_execution_request", worker, execution_request_id)
        ):
            failed = execution.fail_unclaimed(self._context, execution_request_id, worker, reason)
        _request_event("failure_unclaimed", worker, failed)
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
