"""The ledger's application service: each public method is one database transaction that
re-checks every precondition itself (expected head, revision, uniqueness) instead of trusting the
caller. Unique constraints, not in-process locks, make concurrent writers safe, so several ledger
replicas against one PostgreSQL stay correct."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import IntegrityError

from services.ledger import repository
from services.ledger.domain.admission import (
    AdmissionInput,
    WorkerSource,
    check_capacity,
    check_policy_for_admission,
    check_policy_for_execution,
    check_worker_source,
)
from services.ledger.domain.commands import CommandLedger
from services.ledger.domain.execution import (
    PENDING_STATES,
    ExecutionRequestRecord,
    RequestState,
    bound_lease,
    check_not_expired,
    check_worker_write,
    claimed,
    execution_request_id,
    finished,
    lease_expiry,
)
from services.ledger.domain.journal import (
    LEDGER_ONLY_KINDS,
    EntryKind,
    StoredEntry,
    seal,
    validate_payload,
)
from services.ledger.domain.policy import PolicyRevision, PolicySettings, policy_digest
from services.ledger.domain.runs import Run, RunSpec, check_identifier
from shared.canonical import GENESIS_HASH, canonical_text, is_digest, parse_json, sha256_digest
from shared.errors import (
    Aborted,
    Conflict,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    NotFound,
    PreconditionViolation,
)
from shared.journal_chain import Verification, verify_chain
from shared.timeutil import Clock, to_text, utc_now

MAX_BLOB_BYTES = 16 * 1024 * 1024
FENCED_NATIVE_KINDS = frozenset(
    {EntryKind.WORKER_CLAIMED, EntryKind.REQUEST_FAILED, EntryKind.COMMAND_EXECUTED}
)
MAX_JOURNAL_PAGE = 1000
DEFAULT_JOURNAL_PAGE = 100
MAX_POLICY_PAGE = 500
DEFAULT_POLICY_PAGE = 50


def _stale_head(run_id: str, expected: str, sequence: int, head: str) -> Aborted:
    return Aborted(
        "JOURNAL_HEAD_STALE",
        f"journal of {run_id} is at sequence {sequence}, not at the expected head",
        metadata={
            "run_id": run_id,
            "expected_head_hash": expected,
            "current_head_sequence": str(sequence),
            "current_head_hash": head,
        },
        precondition_violations=[
            PreconditionViolation(
                "JOURNAL_HEAD", f"runs/{run_id}/journal", f"current head is {head} at {sequence}"
            )
        ],
    )


def _run_not_found(run_id: str) -> NotFound:
    return NotFound("RUN_NOT_FOUND", f"run {run_id} is not registered", metadata={"run_id": run_id})


class Ledger:
    """Runs, the hash-chained journal, blobs and policy over one SQLAlchemy engine."""

    def __init__(self, engine: Engine, clock: Clock = utc_now) -> None:
        self._engine = engine
        self._clock = clock

    def _now(self) -> str:
        return to_text(self._clock())

    # --- runs -------------------------------------------------------------------------------

    def create_run(self, spec: RunSpec, actor: str) -> tuple[Run, bool]:
        """Register a run; an identical repeat returns the stored run with created=False."""
        spec.validate()
        run = Run(spec, actor, self._now(), spec.digest)
        try:
            with self._engine.begin() as connection:
                existing = repository.get_run(connection, spec.run_id)
                if existing is None:
                    repository.insert_run(connection, run)
                    return run, True
        except IntegrityError:
            with self._engine.connect() as connection:
                existing = repository.get_run(connection, spec.run_id)
        if existing is None:  # pragma: no cover - the insert conflicted, so the row exists
            raise _run_not_found(spec.run_id)
        if existing.spec != spec:
            raise Conflict(
                "RUN_CONFLICT",
                f"run {spec.run_id} is already registered with different content",
                metadata={"run_id": spec.run_id, "stored_run_digest": existing.run_digest},
            )
        return existing, False

    def get_run(self, run_id: str) -> tuple[Run, tuple[int, str]]:
        check_identifier("run_id", run_id)
        with self._engine.connect() as connection:
            run = repository.get_run(connection, run_id)
            if run is None:
                raise _run_not_found(run_id)
            return run, repository.journal_head(connection, run_id)

    # --- journal ----------------------------------------------------------------------------

    def append(
        self, run_id: str, expected_head_hash: str, kind: EntryKind, payload_json: str, actor: str
    ) -> StoredEntry:
        """Append one native entry at the expected head (empty means the genesis head)."""
        check_identifier("run_id", run_id)
        if kind in LEDGER_ONLY_KINDS:
            raise InvalidArgument(
                "JOURNAL_ENTRY_KIND_RESERVED",
                f"{kind.value} entries are written only by the ledger's own transactions",
                metadata={"kind": kind.value},
                field_violations=[FieldViolation("kind", "reserved for ledger transactions")],
            )
        canonical = validate_payload(kind, payload_json)
        expected = expected_head_hash or GENESIS_HASH
        if not is_digest(expected):
            raise InvalidArgument(
                "FIELD_INVALID",
                "expected_head_hash must be sha256:<64 hex> (or empty for an empty journal)",
                metadata={"field": "expected_head_hash"},
                field_violations=[FieldViolation("expected_head_hash", "must be sha256:<64 hex>")],
            )
        try:
            with self._engine.begin() as connection:
                run = repository.get_run(connection, run_id)
                if run is None:
                    raise _run_not_found(run_id)
                sequence, head = repository.journal_head(connection, run_id)
                if head != expected:
                    raise _stale_head(run_id, expected, sequence, head)
                self._check_native_write(connection, run, kind, canonical)
                entry = seal(run_id, sequence + 1, kind, canonical, head, actor, self._now())
                repository.insert_journal_entry(connection, entry)
                return entry
        except IntegrityError:
            # A concurrent append committed at the same head first; report where the head is now.
            with self._engine.connect() as connection:
                sequence, head = repository.journal_head(connection, run_id)
            raise _stale_head(run_id, expected, sequence, head) from None

    @staticmethod
    def _check_native_write(
        connection: Connection, run: Run, kind: EntryKind, canonical_payload: str
    ) -> None:
        """Native appends may not route around the continuity rules: a continuity execution
        request is written only through ExecutionService under its lease generation, and a
        native command is charged against the same command limit."""
        payload = parse_json(canonical_payload)
        assert isinstance(payload, dict)
        fenced = payload.get("execution_request_id")
        if (
            kind in FENCED_NATIVE_KINDS
            and isinstance(fenced, str)
            and repository.get_execution_request(connection, fenced) is not None
        ):
            raise InvalidArgument(
                "EXECUTION_REQUEST_FENCED",
                f"{fenced} is a continuity execution request: write through ExecutionService "
                "with its lease generation",
                metadata={"execution_request_id": fenced, "kind": kind.value},
            )
        if kind is EntryKind.COMMAND_EXECUTED:
            usage = CommandLedger.from_entries(
                repository.command_entries(connection, run.spec.run_id)
            )
            command_id = str(payload["command_id"])
            if usage.receipt(command_id) is not None:
                raise Conflict(
                    "COMMAND_ALREADY_RECORDED",
                    f"command {command_id} is already charged to this run",
                    metadata={"command_id": command_id},
                )
            usage.check_room(run.spec.command_limit)

    def read_journal(
        self, run_id: str, from_sequence: int, page_size: int
    ) -> tuple[list[StoredEntry], tuple[int, str]]:
        check_identifier("run_id", run_id)
        if from_sequence < 0 or page_size < 0:
            raise InvalidArgument(
                "FIELD_INVALID",
                "from_sequence and page_size must not be negative",
                field_violations=[FieldViolation("from_sequence", "must not be negative")],
            )
        limit = min(page_size or DEFAULT_JOURNAL_PAGE, MAX_JOURNAL_PAGE)
        with self._engine.connect() as connection:
            if repository.get_run(connection, run_id) is None:
                raise _run_not_found(run_id)
            entries = repository.read_journal(connection, run_id, max(from_sequence, 1), limit)
            return entries, repository.journal_head(connection, run_id)

    def verify(self, run_id: str) -> Verification:
        check_identifier("run_id", run_id)
        with self._engine.connect() as connection:
            if repository.get_run(connection, run_id) is None:
                raise _run_not_found(run_id)
            return verify_chain(repository.iter_journal(connection, run_id))

    def follow(
        self, run_id: str, from_sequence: int, page_size: int = 200
    ) -> Iterator[StoredEntry]:
        """Entries from ``from_sequence`` up to the current head (callers poll for more)."""
        next_sequence = max(from_sequence, 1)
        while True:
            entries, _ = self.read_journal(run_id, next_sequence, page_size)
            yield from entries
            if len(entries) < page_size:
                return
            next_sequence = entries[-1].sequence + 1

    # --- blobs ------------------------------------------------------------------------------

    def put_blob(self, content: bytes, media_type: str, expected_digest: str) -> tuple[str, bool]:
        """Store bytes under their digest; idempotent, and stored bytes never change."""
        if len(content) > MAX_BLOB_BYTES:
            raise InvalidArgument(
                "BLOB_TOO_LARGE",
                f"blobs are limited to {MAX_BLOB_BYTES} bytes",
                metadata={"limit_bytes": str(MAX_BLOB_BYTES)},
                field_violations=[FieldViolation("content", "too large")],
            )
        digest = sha256_digest(content)
        if expected_digest and expected_digest != digest:
            raise InvalidArgument(
                "BLOB_DIGEST_MISMATCH",
                f"content digests to {digest}, not {expected_digest}",
                metadata={"digest": digest, "expected_digest": expected_digest},
                field_violations=[FieldViolation("expected_digest", "does not match content")],
            )
        try:
            with self._engine.begin() as connection:
                if repository.blob_exists(connection, digest):
                    return digest, False
                repository.insert_blob(
                    connection,
                    digest,
                    content,
                    media_type or "application/octet-stream",
                    self._now(),
                )
                return digest, True
        except IntegrityError:
            return digest, False  # the same bytes were stored concurrently

    def get_blob(self, digest: str) -> tuple[bytes, str]:
        if not is_digest(digest):
            raise InvalidArgument(
                "FIELD_INVALID",
                "digest must be sha256:<64 hex>",
                metadata={"field": "digest"},
                field_violations=[FieldViolation("digest", "must be sha256:<64 hex>")],
            )
        with self._engine.connect() as connection:
            found = repository.get_blob(connection, digest)
        if found is None:
            raise NotFound("BLOB_NOT_FOUND", f"no blob {digest}", metadata={"digest": digest})
        return found

    # --- policy -----------------------------------------------------------------------------

    def get_policy(self, revision: int) -> PolicyRevision:
        with self._engine.connect() as connection:
            if revision <= 0:
                return repository.current_policy(connection)
            found = repository.policy_revision(connection, revision)
        if found is None:
            raise NotFound(
                "POLICY_REVISION_NOT_FOUND",
                f"no policy revision {revision}",
                metadata={"revision": str(revision)},
            )
        return found

    def put_policy(
        self, expected_revision: int, settings: PolicySettings, actor: str
    ) -> PolicyRevision:
        """Write the next revision if ``expected_revision`` is still current."""
        settings = settings.normalized()

        def stale(current: int) -> Aborted:
            return Aborted(
                "POLICY_REVISION_STALE",
                f"policy is at revision {current}, not {expected_revision}",
                metadata={
                    "current_revision": str(current),
                    "expected_revision": str(expected_revision),
                },
                precondition_violations=[
                    PreconditionViolation(
                        "POLICY_REVISION", "policy", f"current revision is {current}"
                    )
                ],
            )

        try:
            with self._engine.begin() as connection:
                current = repository.lock_current_policy(connection)
                if current.revision != expected_revision:
                    raise stale(current.revision)
                revision = current.revision + 1
                stored = PolicyRevision(
                    revision, settings, actor, self._now(), policy_digest(revision, settings)
                )
                repository.insert_policy_revision(connection, stored)
                return stored
        except IntegrityError:
            with self._engine.connect() as connection:
                raise stale(repository.current_policy(connection).revision) from None

    def list_policies(self, before_revision: int, page_size: int) -> list[PolicyRevision]:
        limit = min(page_size or DEFAULT_POLICY_PAGE, MAX_POLICY_PAGE)
        with self._engine.connect() as connection:
            return repository.list_policy_revisions(connection, before_revision, limit)

    # --- admissions -------------------------------------------------------------------------

    def _append_in(
        self, connection: Connection, run_id: str, kind: EntryKind, payload: object, actor: str
    ) -> StoredEntry:
        """Append at the current head inside the caller's transaction."""
        sequence, head = repository.journal_head(connection, run_id)
        entry = seal(run_id, sequence + 1, kind, canonical_text(payload), head, actor, self._now())
        repository.insert_journal_entry(connection, entry)
        return entry

    def commit_admission(self, admission: AdmissionInput) -> tuple[dict[str, Any], bool]:
        """The native admission transaction. Returns (ticket document, created)."""
        admission.validate()
        try:
            with self._engine.begin() as connection:
                return self._commit_admission(connection, admission)
        except IntegrityError:
            # A concurrent transaction admitted first; answer as if we had come second.
            with self._engine.begin() as connection:
                return self._commit_admission(connection, admission)

    def _commit_admission(
        self, connection: Connection, admission: AdmissionInput
    ) -> tuple[dict[str, Any], bool]:
        policy = repository.lock_current_policy(connection)
        stored = repository.get_ticket(connection, admission.run_id, admission.request_id)
        if stored is not None:
            return self._replay(stored, admission), False
        taken = repository.ticket_for_consumed_graph(
            connection, admission.run_id, admission.consumed_response_digest
        )
        if taken is not None:
            raise Conflict(
                "CONSUMED_GRAPH_ALREADY_ADMITTED",
                "this consumed response already has a continuity ticket",
                metadata={"run_id": taken["run_id"], "request_id": taken["request_id"]},
            )
        run = repository.get_run(connection, admission.run_id)
        if run is None:
            raise _run_not_found(admission.run_id)
        check_policy_for_admission(policy, admission.policy_revision, admission.version)
        sequence, head = repository.journal_head(connection, admission.run_id)
        if head != admission.expected_head_hash:
            raise _stale_head(admission.run_id, admission.expected_head_hash, sequence, head)
        outstanding = repository.list_execution_requests(
            connection, run.spec.run_id, PENDING_STATES
        )
        if outstanding:
            raise FailedPrecondition(
                "CLAIM_OUTSTANDING",
                "the run already has a queued or executing claim",
                metadata={"execution_request_id": outstanding[0].execution_request_id},
            )
        check_capacity(
            policy,
            per_run=repository.count_tickets_for_run(connection, run.spec.run_id),
            pending=repository.count_execution_requests(connection, PENDING_STATES),
        )
        if not repository.blob_exists(connection, admission.derived_checkpoint_digest):
            if not admission.derived_checkpoint:
                raise FailedPrecondition(
                    "DERIVED_CHECKPOINT_MISSING",
                    "send the derived checkpoint bytes with the admission",
                    metadata={"digest": admission.derived_checkpoint_digest},
                )
            repository.insert_blob(
                connection,
                admission.derived_checkpoint_digest,
                admission.derived_checkpoint,
                "application/json",
                self._now(),
            )
        now = self._clock()
        lease_seconds = bound_lease(
            admission.valid_for_seconds, policy.settings.window_seconds, run, now
        )
        request_id = execution_request_id(run.spec.run_id, admission.request_id)
        actor = admission.operator_identity
        settlement = self._append_in(
            connection,
            run.spec.run_id,
            EntryKind.MIGRATION_SETTLEMENT,
            {
                "request_id": admission.request_id,
                "version": admission.version,
                "candidate_digest": admission.digests["candidate_digest"],
                "derived_checkpoint_digest": admission.derived_checkpoint_digest,
                "witness_digest": admission.witness_digest,
                "consumed_response_digest": admission.consumed_response_digest,
                "policy_revision": policy.revision,
            },
            actor,
        )
        claim = self._append_in(
            connection,
            run.spec.run_id,
            EntryKind.OWNERSHIP_CLAIM,
            {
                "request_id": admission.request_id,
                "execution_request_id": request_id,
                "attempt_id": run.spec.attempt_id,
                "lease_seconds": lease_seconds,
            },
            actor,
        )
        created_at = to_text(now)
        record = ExecutionRequestRecord(
            execution_request_id=request_id,
            run_id=run.spec.run_id,
            attempt_id=run.spec.attempt_id,
            request_id=admission.request_id,
            checkpoint_digest=admission.derived_checkpoint_digest,
            policy_revision=policy.revision,
            state=RequestState.QUEUED,
            lease_generation=0,
            lease_seconds=lease_seconds,
            lease_expires_at=lease_expiry(now, lease_seconds),
            owner="",
            created_at=created_at,
            updated_at=created_at,
        )
        repository.insert_execution_request(connection, record)
        ticket = {
            "run_id": run.spec.run_id,
            "request_id": admission.request_id,
            "operator_identity": actor,
            "settlement_sequence": settlement.sequence,
            "claim_sequence": claim.sequence,
            "digests": dict(admission.digests),
            "policy_revision": policy.revision,
            "version": admission.version,
            "derived_checkpoint_digest": admission.derived_checkpoint_digest,
            "request_content_digest": admission.request_content_digest,
            "execution_request_id": request_id,
            "created_at": created_at,
        }
        repository.insert_ticket(
            connection,
            run_id=run.spec.run_id,
            request_id=admission.request_id,
            operator_identity=actor,
            request_content_digest=admission.request_content_digest,
            consumed_response_digest=admission.consumed_response_digest,
            execution_request_id=request_id,
            ticket_json=canonical_text(ticket),
            created_at=created_at,
        )
        return ticket, True

    @staticmethod
    def _replay(stored: dict[str, str], admission: AdmissionInput) -> dict[str, Any]:
        """The stored ticket for an identical repeat; a conflict for anything else."""
        if stored["operator_identity"] != admission.operator_identity:
            raise Conflict(
                "REQUEST_ID_OWNED_BY_ANOTHER_IDENTITY",
                f"request {admission.request_id} was submitted by another identity",
                metadata={"request_id": admission.request_id},
            )
        if stored["request_content_digest"] != admission.request_content_digest:
            raise Conflict(
                "REQUEST_ID_CONFLICT",
                f"request {admission.request_id} was already submitted with different content",
                metadata={
                    "request_id": admission.request_id,
                    "stored_request_content_digest": stored["request_content_digest"],
                },
            )
        document = parse_json(stored["ticket_json"])
        assert isinstance(document, dict)
        return document

    def get_admission(
        self, run_id: str, request_id: str
    ) -> tuple[dict[str, Any], ExecutionRequestRecord]:
        """The saved ticket and the current state of its execution request."""
        check_identifier("run_id", run_id)
        check_identifier("request_id", request_id)
        with self._engine.connect() as connection:
            stored = repository.get_ticket(connection, run_id, request_id)
            if stored is None:
                raise NotFound(
                    "ADMISSION_NOT_FOUND",
                    f"no admission request {request_id} for run {run_id}",
                    metadata={"run_id": run_id, "request_id": request_id},
                )
            record = repository.get_execution_request(connection, stored["execution_request_id"])
        document = parse_json(stored["ticket_json"])
        assert isinstance(document, dict) and record is not None
        return document, record

    # --- execution requests and commands ----------------------------------------------------

    def list_execution_requests(
        self, run_id: str, states: tuple[RequestState, ...]
    ) -> list[ExecutionRequestRecord]:
        check_identifier("run_id", run_id)
        with self._engine.connect() as connection:
            if repository.get_run(connection, run_id) is None:
                raise _run_not_found(run_id)
            return repository.list_execution_requests(connection, run_id, states)

    def get_execution_request(self, execution_request_id: str) -> ExecutionRequestRecord:
        with self._engine.connect() as connection:
            return _existing_request(connection, execution_request_id)

    def claim(
        self, execution_request_id: str, worker: str, presented: WorkerSource
    ) -> ExecutionRequestRecord:
        """A worker claims a queued continuation after the current checks are repeated."""
        with self._engine.begin() as connection:
            policy = repository.lock_current_policy(connection)
            record = _existing_request(connection, execution_request_id, for_update=True)
            if record.state is not RequestState.QUEUED:
                raise FailedPrecondition(
                    "EXECUTION_REQUEST_NOT_QUEUED",
                    f"execution request is {record.state.value}; "
                    "claimed requests are never requeued",
                    metadata={"state": record.state.value},
                )
            check_not_expired(record, self._clock())
            check_policy_for_execution(policy, record.policy_revision)
            run = repository.get_run(connection, record.run_id)
            assert run is not None
            check_worker_source(run, record, presented)
            now = self._now()
            updated = claimed(record, worker, now)
            repository.update_execution_request(connection, updated)
            self._append_in(
                connection,
                record.run_id,
                EntryKind.WORKER_CLAIMED,
                {
                    "execution_request_id": record.execution_request_id,
                    "lease_generation": updated.lease_generation,
                    "attempt_id": record.attempt_id,
                },
                worker,
            )
            return updated

    def finish(
        self,
        execution_request_id: str,
        worker: str,
        generation: int,
        outcome: RequestState,
        reason: str = "",
    ) -> ExecutionRequestRecord:
        """Complete or fail a claimed request under the current generation."""
        with self._engine.begin() as connection:
            record = _existing_request(connection, execution_request_id, for_update=True)
            check_worker_write(record, worker, generation, self._clock())
            updated = finished(record, outcome, self._now())
            repository.update_execution_request(connection, updated)
            if outcome is RequestState.COMPLETED:
                kind, payload = EntryKind.REQUEST_EVENT, {"event": "completed"}
            else:
                kind, payload = EntryKind.REQUEST_FAILED, {"reason": reason}
            self._append_in(
                connection,
                record.run_id,
                kind,
                {
                    "execution_request_id": execution_request_id,
                    "lease_generation": generation,
                    **payload,
                },
                worker,
            )
            return updated

    def record_command(
        self,
        execution_request_id: str,
        worker: str,
        generation: int,
        command_id: str,
        command_digest: str,
    ) -> tuple[int, bool, int, int]:
        """Charge one command before it runs: (journal sequence, charged, used, limit)."""
        check_identifier("command_id", command_id)
        if not is_digest(command_digest):
            raise InvalidArgument(
                "FIELD_INVALID",
                "command_digest must be sha256:<64 hex>",
                metadata={"field": "command_digest"},
                field_violations=[FieldViolation("command_digest", "must be sha256:<64 hex>")],
            )
        with self._engine.begin() as connection:
            policy = repository.lock_current_policy(connection)
            record = _existing_request(connection, execution_request_id, for_update=True)
            check_worker_write(record, worker, generation, self._clock())
            check_policy_for_execution(policy, record.policy_revision)
            run = repository.get_run(connection, record.run_id)
            assert run is not None
            usage = CommandLedger.from_entries(
                repository.command_entries(connection, record.run_id)
            )
            previous = usage.receipt(command_id)
            if previous is not None:
                if previous.command_digest != command_digest:
                    raise Conflict(
                        "COMMAND_ID_CONFLICT",
                        f"command {command_id} was recorded with a different command digest",
                        metadata={"command_id": command_id},
                    )
                return previous.sequence, False, usage.used, run.spec.command_limit
            usage.check_room(run.spec.command_limit)
            entry = self._append_in(
                connection,
                record.run_id,
                EntryKind.COMMAND_EXECUTED,
                {
                    "command_id": command_id,
                    "command_digest": command_digest,
                    "execution_request_id": execution_request_id,
                    "lease_generation": generation,
                },
                worker,
            )
            return entry.sequence, True, usage.used + 1, run.spec.command_limit

    def command_usage(self, run_id: str) -> tuple[int, int]:
        check_identifier("run_id", run_id)
        with self._engine.connect() as connection:
            run = repository.get_run(connection, run_id)
            if run is None:
                raise _run_not_found(run_id)
            usage = CommandLedger.from_entries(repository.command_entries(connection, run_id))
            return usage.used, run.spec.command_limit


def _existing_request(
    connection: Connection, execution_request_id: str, *, for_update: bool = False
) -> ExecutionRequestRecord:
    record = repository.get_execution_request(
        connection, execution_request_id, for_update=for_update
    )
    if record is None:
        raise NotFound(
            "EXECUTION_REQUEST_NOT_FOUND",
            f"no execution request {execution_request_id}",
            metadata={"execution_request_id": execution_request_id},
        )
    return record
