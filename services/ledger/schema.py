"""Table definitions of the ledger database (SQLAlchemy Core). Migrations create them; the
repository module is the only code that issues statements against them.

Timestamps are stored as ISO-8601 UTC text with microseconds so that the hashed journal envelope
reads back byte-identical on SQLite and PostgreSQL.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("run_id", String(128), primary_key=True),
    Column("task_id", String(256), nullable=False),
    Column("attempt_id", String(256), nullable=False),
    Column("source_revision", String(256), nullable=False),
    Column("configuration_digest", String(80), nullable=False),
    Column("provider_timeout_seconds", BigInteger, nullable=False),
    Column("active_deadline", String(40), nullable=True),
    Column("command_limit", BigInteger, nullable=False),
    Column("time_budget_protocol", String(64), nullable=False),
    Column("source_profile", String(256), nullable=False),
    Column("created_by", String(256), nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("run_digest", String(80), nullable=False),
    # Worker rounds completed with a certified completion (migration 0005); outside run_digest.
    Column("completed_rounds", BigInteger, nullable=False, server_default="0"),
    # For listing (migration 0008, ADR 0022), kept in the transaction that records each change:
    # when anything was last recorded for the run, what continuity last did with it, and the
    # execution request its newest admission queued (null: never admitted).
    Column("updated_at", String(40), nullable=False, server_default=""),
    Column("continuity_state", String(16), nullable=False, server_default="active"),
    Column("current_execution_request_id", String(80), nullable=True),
    Index("ix_runs_updated", "updated_at", "run_id"),
    Index("ix_runs_state_updated", "continuity_state", "updated_at", "run_id"),
)

# The per-run native journal. (run_id, sequence) is the primary key and (run_id, prev_hash) is
# unique: two appends at the same head cannot both commit, so no fork is possible, even for the
# first append of an empty run, without any in-process lock.
journal_entries = Table(
    "journal_entries",
    metadata,
    Column("run_id", String(128), ForeignKey("runs.run_id"), nullable=False),
    Column("sequence", BigInteger, nullable=False),
    Column("kind", String(64), nullable=False),
    Column("payload_json", Text, nullable=False),
    Column("prev_hash", String(80), nullable=False),
    Column("hash", String(80), nullable=False),
    Column("actor", String(256), nullable=False),
    Column("recorded_at", String(40), nullable=False),
    PrimaryKeyConstraint("run_id", "sequence", name="pk_journal_entries"),
    UniqueConstraint("run_id", "prev_hash", name="uq_journal_entries_link"),
    # The newest entry of a kind and a run's entries of some kinds are index ranges, not walks
    # over the whole journal (migration 0009).
    Index("ix_journal_entries_run_kind_sequence", "run_id", "kind", "sequence"),
)

blobs = Table(
    "blobs",
    metadata,
    Column("digest", String(80), primary_key=True),
    Column("content", LargeBinary, nullable=False),
    Column("media_type", String(128), nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("created_at", String(40), nullable=False),
)

policy_revisions = Table(
    "policy_revisions",
    metadata,
    Column("revision", BigInteger, primary_key=True, autoincrement=False),
    Column("enabled", Boolean, nullable=False),
    Column("window_seconds", BigInteger, nullable=False),
    Column("per_run_ticket_limit", BigInteger, nullable=False),
    Column("pending_ticket_limit", BigInteger, nullable=False),
    Column("allow_unavailable_source_observations", Boolean, nullable=False),
    Column("allow_pre_admission_recovery", Boolean, nullable=False),
    Column("allow_readonly_observation_recovery", Boolean, nullable=False),
    Column("updated_by", String(256), nullable=False),
    Column("updated_at", String(40), nullable=False),
    Column("digest", String(80), nullable=False),
    # Written by migration 0015 (PostgreSQL): the schema from which no statement locks a row here.
    comment=(
        "Immutable policy revisions. From schema revision 0015 the policy lock is the "
        "transaction-scoped advisory gate of the schema alone (ADR 0067); no ledger statement "
        "locks these rows."
    ),
)

execution_requests = Table(
    "execution_requests",
    metadata,
    Column("execution_request_id", String(80), primary_key=True),
    Column("run_id", String(128), ForeignKey("runs.run_id"), nullable=False),
    Column("attempt_id", String(256), nullable=False),
    Column("request_id", String(128), nullable=False),
    Column("checkpoint_digest", String(80), nullable=False),
    Column("policy_revision", BigInteger, nullable=False),
    Column("state", String(16), nullable=False),
    Column("lease_generation", BigInteger, nullable=False),
    Column("lease_seconds", BigInteger, nullable=False),
    Column("lease_expires_at", String(40), nullable=True),
    Column("owner", String(256), nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("updated_at", String(40), nullable=False),
    # The reason of the native admission-refusal record (migration 0006); set, the request is
    # ineligible for automatic scheduling.
    Column("admission_refusal", String(64), nullable=True),
    Index("ix_execution_requests_run_state", "run_id", "state"),
    # Listing across runs, newest update first, all or in one state (migration 0008).
    Index("ix_execution_requests_updated", "updated_at", "execution_request_id"),
    Index("ix_execution_requests_state_updated", "state", "updated_at", "execution_request_id"),
    # The queued requests whose lease ran out, an index range (migration 0010, ADR 0031).
    Index("ix_execution_requests_state_expiry", "state", "lease_expires_at"),
)

# The number of pending (queued or claimed) execution requests is the sum of ``pending`` over
# these rows, kept by a trigger on execution_requests that every writer fires (migration 0010,
# ADR 0031): a count the queue caps read in one index range instead of a scan of the queue.
queue_depth = Table(
    "queue_depth",
    metadata,
    Column("shard", Integer, primary_key=True, autoincrement=False),
    Column("pending", BigInteger, nullable=False),
    # The requests that left a pending state through this shard (migration 0014, ADR 0049).
    Column("released", BigInteger, nullable=False, server_default="0"),
)

# One row (slot 0): how many execution requests ever entered a pending state, kept by the same
# trigger. Pending = entered - sum(queue_depth.released); an admission consumes a place with one
# conditional statement on this row (repository/execution_requests.py, TAKE_PENDING_SLOT;
# migration 0014, ADR 0049).
pending_slots = Table(
    "pending_slots",
    metadata,
    Column("slot", Integer, primary_key=True, autoincrement=False),
    Column("entered", BigInteger, nullable=False),
)

# One row per admitted request. (run_id, request_id) is the idempotency key; the unique
# (run_id, consumed_response_digest) means another identity can never obtain a second ticket for
# the same consumed graph.
admission_tickets = Table(
    "admission_tickets",
    metadata,
    Column("run_id", String(128), ForeignKey("runs.run_id"), nullable=False),
    Column("request_id", String(128), nullable=False),
    Column("operator_identity", String(256), nullable=False),
    Column("request_content_digest", String(80), nullable=False),
    Column("consumed_response_digest", String(80), nullable=False),
    Column("execution_request_id", String(80), nullable=False),
    Column("ticket_json", Text, nullable=False),
    Column("created_at", String(40), nullable=False),
    PrimaryKeyConstraint("run_id", "request_id", name="pk_admission_tickets"),
    UniqueConstraint(
        "run_id", "consumed_response_digest", name="uq_admission_tickets_consumed_graph"
    ),
)

# One row per recovery action, keyed by the caller-chosen recovery_id (the idempotency key); the
# unique (run_id, request_id, workflow) lets only one recovery of a workflow ever succeed per
# request, whatever its recovery_id or identity.
recovery_actions = Table(
    "recovery_actions",
    metadata,
    Column("recovery_id", String(128), primary_key=True),
    Column("run_id", String(128), ForeignKey("runs.run_id"), nullable=False),
    Column("request_id", String(128), nullable=False),
    Column("workflow", String(32), nullable=False),
    Column("actor", String(256), nullable=False),
    Column("request_content_digest", String(80), nullable=False),
    Column("execution_request_id", String(80), nullable=False),
    Column("recovery_json", Text, nullable=False),
    Column("created_at", String(40), nullable=False),
    UniqueConstraint(
        "run_id", "request_id", "workflow", name="uq_recovery_actions_one_per_request"
    ),
    # The claim and every command dispatch find the recoveries that queued a request (11.5c).
    Index("ix_recovery_actions_execution_request", "execution_request_id"),
)

# One row per reconciliation decision, keyed by the caller-chosen reconciliation_id (the
# idempotency key); the unique execution_request_id lets only one decision ever succeed per
# claimed execution request, whatever its reconciliation_id or identity.
reconciliations = Table(
    "reconciliations",
    metadata,
    Column("reconciliation_id", String(128), primary_key=True),
    Column("run_id", String(128), ForeignKey("runs.run_id"), nullable=False),
    Column("execution_request_id", String(80), nullable=False),
    Column("decision", String(32), nullable=False),
    Column("actor", String(256), nullable=False),
    Column("request_content_digest", String(80), nullable=False),
    Column("reconciliation_json", Text, nullable=False),
    Column("created_at", String(40), nullable=False),
    UniqueConstraint("execution_request_id", name="uq_reconciliations_one_per_request"),
)

# The ledger's Ed25519 signature over each run head a committing append made (ADR 0015). Written
# in the same transaction as the entries, so no head is committed unsigned while a key is set.
signed_heads = Table(
    "signed_heads",
    metadata,
    Column("run_id", String(128), ForeignKey("runs.run_id"), nullable=False),
    Column("sequence", BigInteger, nullable=False),
    Column("head_hash", String(80), nullable=False),
    Column("key_id", String(80), nullable=False),
    Column("signed_at", String(40), nullable=False),
    Column("signature", LargeBinary, nullable=False),
    # A forge.continuity.signed-head/2 statement's other members (migration 0012); NULL in a /1
    # signature, and previous_* NULL in a run's first signature.
    Column("format", String(64), nullable=True),
    Column("previous_sequence", BigInteger, nullable=True),
    Column("previous_head_hash", String(80), nullable=True),
    Column("previous_signature_digest", String(80), nullable=True),
    Column("unsigned_through", BigInteger, nullable=True),
    PrimaryKeyConstraint("run_id", "sequence", name="pk_signed_heads"),
    # The head feed monitors follow reads the heads signed since a time (ListHeads).
    Index("ix_signed_heads_signed_at", "signed_at", "run_id"),
)

# A run's declared pre-signing prefix: entries up to through_sequence may lack a signature
# (written before the ledger signed heads). Written by migration 0012 and by the operator's
# explicit declaration only; the ledger reads it (ADR 0015).
unsigned_prefixes = Table(
    "unsigned_prefixes",
    metadata,
    Column("run_id", String(128), ForeignKey("runs.run_id"), primary_key=True),
    Column("through_sequence", BigInteger, nullable=False),
    Column("declared_at", String(40), nullable=False),
    Column("declared_by", String(256), nullable=False),
)
