"""The ledger facade the servicers and tests use: one method per transaction, each delegating to
its module under ``services.ledger.transactions``. The execution requests' methods are in
``service_execution``, the state and steps every method shares in ``service_base``. No rules
and no SQL live here. Each committed state change leaves one event line
(``shared.runtime.events``); a replay that wrote nothing leaves none."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from services.ledger.domain.journal import EntryKind, StoredEntry
from services.ledger.domain.policy import PolicyRevision, PolicySettings
from services.ledger.domain.reconciliation import ReconcileInput, VerifyInput
from services.ledger.domain.reconciliation import Verification as RecordedVerification
from services.ledger.domain.runs import Run, RunReading, RunSpec
from services.ledger.domain.signing import PublishedKey
from services.ledger.service_base import request_event
from services.ledger.service_execution import ExecutionRequests
from services.ledger.transactions import (
    admission,
    blobs,
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
from services.ledger.transactions.inspection import JournalInspection
from services.ledger.transactions.journal import JournalPage
from services.ledger.transactions.listing import ExecutionRequestPage, RunPage
from services.ledger.transactions.reconciliation import Reconciled
from services.ledger.transactions.reconciliation_review import Inspection
from services.ledger.transactions.recovery_input import Recovery, RecoveryInput
from services.ledger.transactions.refusal_handoff import BoundAction
from services.ledger.transactions.signed_heads import HeadFeedPage, SignedHeadPage
from shared.continuity.admissibility_facts import REVIEW
from shared.continuity.commit_admission import CommitAdmission
from shared.continuity.journal_chain import Verification
from shared.runtime.events import record_event


class Ledger(ExecutionRequests):
    """Runs, the hash-chained journal, blobs, policy, admissions and execution requests over one
    SQLAlchemy engine."""

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

    def commit_admission(self, request: CommitAdmission) -> Admission:
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
            request_event(
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
            request_event(
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
            request_event(
                f"reconciliation.{request.decision}",
                request.actor,
                decided.reconciled,
                reconciliation_id=request.reconciliation_id,
                retry_execution_request_id=decided.saved.retry_execution_request_id,
            )
        return decided

    def get_reconciliation(self, run_id: str, execution_request_id: str) -> Reconciled:
        return reconciliation.get(self._context, run_id, execution_request_id)
