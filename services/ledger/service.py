"""The ledger's application service: each public method is one database transaction that
re-checks every precondition itself (expected head, revision, uniqueness) instead of trusting the
caller. Unique constraints, not in-process locks, make concurrent writers safe, so several ledger
replicas against one PostgreSQL stay correct."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from services.ledger import repository
from services.ledger.domain.journal import (
    LEDGER_ONLY_KINDS,
    EntryKind,
    StoredEntry,
    Verification,
    seal,
    validate_payload,
    verify_chain,
)
from services.ledger.domain.policy import PolicyRevision, PolicySettings, policy_digest
from services.ledger.domain.runs import Run, RunSpec, check_identifier
from shared.canonical import GENESIS_HASH, is_digest, parse_json, sha256_digest
from shared.errors import (
    Aborted,
    Conflict,
    FieldViolation,
    InvalidArgument,
    NotFound,
    PreconditionViolation,
)
from shared.timeutil import Clock, to_text, utc_now

MAX_BLOB_BYTES = 16 * 1024 * 1024
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
                if repository.get_run(connection, run_id) is None:
                    raise _run_not_found(run_id)
                sequence, head = repository.journal_head(connection, run_id)
                if head != expected:
                    raise _stale_head(run_id, expected, sequence, head)
                entry = seal(run_id, sequence + 1, kind, canonical, head, actor, self._now())
                repository.insert_journal_entry(connection, entry)
                return entry
        except IntegrityError:
            # A concurrent append committed at the same head first; report where the head is now.
            with self._engine.connect() as connection:
                sequence, head = repository.journal_head(connection, run_id)
            raise _stale_head(run_id, expected, sequence, head) from None

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
                current = repository.current_policy(connection)
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

    def get_admission(self, run_id: str, request_id: str) -> dict[str, object]:
        """The saved ticket of an admission request (its stored JSON document)."""
        check_identifier("run_id", run_id)
        check_identifier("request_id", request_id)
        with self._engine.connect() as connection:
            stored = repository.get_ticket_json(connection, run_id, request_id)
        if stored is None:
            raise NotFound(
                "ADMISSION_NOT_FOUND",
                f"no admission request {request_id} for run {run_id}",
                metadata={"run_id": run_id, "request_id": request_id},
            )
        document = parse_json(stored)
        assert isinstance(document, dict)
        return document
