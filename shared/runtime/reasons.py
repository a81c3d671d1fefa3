"""The catalogue of error reasons: every ``ErrorInfo.reason`` a caller can receive, with its gRPC
code, its metadata keys and one line of meaning.

Raise sites use the reason literal with the DomainError subclass of the listed code; a test scans
the code for every raised literal and checks it is here, with the same code, and that its metadata
keys are listed. ``docs/errors.md`` and the table of the "Error model" section of
``docs/architecture.md`` are generated from this module::

    python -m shared.continuity.reasons_doc --write      # rewrite both after changing a reason
    python -m shared.continuity.reasons_doc --markdown   # print docs/errors.md
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from shared.runtime.errors import ErrorKind


@dataclass(frozen=True)
class Reason:
    """One stable error reason."""

    name: str
    code: ErrorKind
    metadata_keys: tuple[str, ...]
    meaning: str
    # True for the fixed reasons of a status that carried no ErrorInfo (transport or framework).
    bare_status: bool = False


# What each code is used for, in the order the documentation lists them.
CODE_USES: Mapping[ErrorKind, str] = MappingProxyType(
    {
        ErrorKind.INVALID_ARGUMENT: "malformed input; nothing was written",
        ErrorKind.NOT_FOUND: "the named resource does not exist",
        ErrorKind.ALREADY_EXISTS: "an identifier reused with different content or by another "
        "identity; choose another identifier",
        ErrorKind.ABORTED: "optimistic concurrency; re-read and retry",
        ErrorKind.FAILED_PRECONDITION: "the state forbids the operation (stale digest, held, "
        "disabled, refused migration)",
        ErrorKind.RESOURCE_EXHAUSTED: "a cap or limit is reached",
        ErrorKind.UNAUTHENTICATED: "missing, malformed or unknown credentials",
        ErrorKind.PERMISSION_DENIED: "a known identity lacks the role or the lease",
        ErrorKind.UNIMPLEMENTED: "in the contract, not delivered in this release",
        ErrorKind.UNAVAILABLE: "a dependency cannot be reached; safe to retry",
        ErrorKind.DEADLINE_EXCEEDED: "a call did not finish before its deadline",
        ErrorKind.CANCELLED: "a call was cancelled",
        ErrorKind.INTERNAL: "an invariant broke; the details are in the service log, not in the "
        "answer",
    }
)

_IA, _NF, _AE = ErrorKind.INVALID_ARGUMENT, ErrorKind.NOT_FOUND, ErrorKind.ALREADY_EXISTS
_AB, _FP = ErrorKind.ABORTED, ErrorKind.FAILED_PRECONDITION
_RE, _UA, _PD = ErrorKind.RESOURCE_EXHAUSTED, ErrorKind.UNAUTHENTICATED, ErrorKind.PERMISSION_DENIED
_UI, _UV, _IN = ErrorKind.UNIMPLEMENTED, ErrorKind.UNAVAILABLE, ErrorKind.INTERNAL
_ANALYSIS = "the consumed response cannot be replayed under the requested version"
_HISTORICAL = "the historical checkpoint is refused"
_CHECKPOINT = "the historical (or, for a reproduction, the derived) checkpoint is refused"

# One entry per reason, laid out as a table (the formatter would spread each over six lines).
# fmt: off
_REASONS: tuple[Reason, ...] = (
    # --- INVALID_ARGUMENT ------------------------------------------------------------------------
    Reason("FIELD_REQUIRED", _IA, ("field",), "a required request field is empty"),
    Reason("FIELD_INVALID", _IA, ("field", "origin"),
           "a request field is malformed or out of range (origin=client when the Python client "
           "refused it before sending)"),
    Reason("VERSION_UNSUPPORTED", _IA, ("expected", "field", "origin", "supported"),
           "the requested continuity version is not one this release supports"),
    Reason("ACKNOWLEDGEMENT_REQUIRED", _IA, ("missing", "origin"),
           "an acknowledgement the requested version requires was not given"),
    Reason("RUN_INVALID", _IA, (), "the run registration is malformed"),
    Reason("FILTER_INVALID", _IA, ("allowed_fields", "field", "position"),
           "a listing's filter is outside the supported AIP-160 subset (allowed_fields names "
           "the fields of that listing; position is the offending character)"),
    Reason("PAGE_TOKEN_INVALID", _IA, ("field",),
           "a listing's page_token was altered, or was issued for another filter or listing"),
    Reason("ADMISSION_INVALID", _IA, (),
           "the admission the ledger was asked to commit is malformed (field violations in "
           "BadRequest)"),
    Reason("POLICY_INVALID", _IA, (), "the policy update is malformed"),
    Reason("RECOVERY_INVALID", _IA, (),
           "the recovery the ledger was asked to commit is malformed (field violations in "
           "BadRequest)"),
    Reason("RECONCILIATION_INVALID", _IA, (),
           "the reconciliation decision or verification request is malformed or oversized "
           "(field violations in BadRequest)"),
    Reason("REVIEWED_REJECTION_INVALID", _IA, (),
           "the reviewed provider rejection is incomplete or malformed, or a provider counter "
           "(admissions, jobs, dispatches, tool callbacks) is not 0 (field violations in "
           "BadRequest)"),
    Reason("CORRECTIVE_PROVIDER_INVALID", _IA, ("field", "origin"),
           "the rejected-boundary recovery's corrective provider configuration is missing or "
           "malformed, or names the rejected provider epoch again (field violations in "
           "BadRequest)"),
    Reason("JOURNAL_ENTRY_KIND_UNKNOWN", _IA, ("kind",), "the journal entry kind is not defined"),
    Reason("JOURNAL_ENTRY_KIND_RESERVED", _IA, ("kind",),
           "the journal entry kind is written only by the ledger itself"),
    Reason("JOURNAL_PAYLOAD_INVALID", _IA, ("kind", "missing"),
           "the journal payload is not canonical JSON of the kind's shape"),
    Reason("JOURNAL_PAYLOAD_TOO_LARGE", _IA, ("limit_bytes",),
           "the journal payload exceeds the size limit"),
    Reason("EXECUTION_REQUEST_FENCED", _IA, ("execution_request_id", "kind"),
           "a continuity execution request is written only through ExecutionService, with its "
           "lease generation"),
    Reason("BLOB_TOO_LARGE", _IA, ("limit_bytes",), "the blob exceeds the size limit"),
    Reason("REASON_TOO_LONG", _IA, ("field", "limit_chars"),
           "a failure or cancellation reason exceeds its limit (512 characters); nothing written"),
    Reason("BLOB_DIGEST_MISMATCH", _IA, ("digest", "expected_digest"),
           "the blob's bytes do not hash to the digest it was sent under"),
    Reason("CHECKPOINT_MALFORMED", _IA, (),
           "the historical or derived checkpoint is not a JSON object"),
    Reason("CONSUMED_AT_INVALID", _IA, (), "consumed_at is not an RFC 3339 UTC timestamp"),
    # --- NOT_FOUND -------------------------------------------------------------------------------
    Reason("RUN_NOT_FOUND", _NF, ("run_id",), "no run is registered under this id"),
    Reason("BLOB_NOT_FOUND", _NF, ("digest",), "no blob is stored under this digest"),
    Reason("ADMISSION_NOT_FOUND", _NF, ("request_id", "run_id"),
           "no admission is stored under this run and request id"),
    Reason("POLICY_REVISION_NOT_FOUND", _NF, ("revision",), "no policy revision with this number"),
    Reason("EXECUTION_REQUEST_NOT_FOUND", _NF, ("execution_request_id",),
           "no execution request with this id"),
    Reason("RECOVERY_NOT_FOUND", _NF, ("request_id", "run_id", "workflow"),
           "no recovery of this workflow is stored for this run and request id"),
    Reason("RECONCILIATION_NOT_FOUND", _NF, ("execution_request_id", "run_id"),
           "no reconciliation decision is stored for this run and execution request"),
    # --- ALREADY_EXISTS --------------------------------------------------------------------------
    Reason("RUN_CONFLICT", _AE, ("run_id", "stored_run_digest"),
           "the run id is registered with different content"),
    Reason("REQUEST_ID_CONFLICT", _AE,
           ("admitted_candidate_digest", "origin", "request_id", "reviewed_candidate_digest",
            "stored_request_content_digest"),
           "the request id was already submitted by this identity with different content "
           "(origin=client: the CLI found it admitted from another candidate than the reviewed)"),
    Reason("REQUEST_ID_OWNED_BY_ANOTHER_IDENTITY", _AE, ("request_id",),
           "the request id was already submitted by another identity"),
    Reason("RECOVERY_ID_CONFLICT", _AE, ("recovery_id", "stored_request_content_digest"),
           "this recovery id was already submitted by this identity with different content "
           "(recovery ids are global: unique across every run and request)"),
    Reason("RECOVERY_ID_OWNED_BY_ANOTHER_IDENTITY", _AE, ("recovery_id",),
           "this recovery id was already submitted by another identity (recovery ids are "
           "global)"),
    Reason("RECOVERY_ALREADY_SPENT", _AE, ("recovery_id", "spent_by_recovery_id"),
           "the request's one recovery of this workflow was spent by another recovery id; the "
           "submitted id was never used, and no id can replace the spent action"),
    Reason("RECONCILIATION_ID_CONFLICT", _AE,
           ("reconciliation_id", "stored_request_content_digest"),
           "the reconciliation id was already used by this identity with different content "
           "(reconciliation ids are global: unique across every run and request)"),
    Reason("RECONCILIATION_ID_OWNED_BY_ANOTHER_IDENTITY", _AE, ("reconciliation_id",),
           "the reconciliation id was already used by another identity (reconciliation ids are "
           "global)"),
    Reason("CONSUMED_GRAPH_ALREADY_ADMITTED", _AE, ("request_id", "run_id"),
           "the consumed response was already admitted under another request id"),
    Reason("COMMAND_ID_CONFLICT", _AE, ("command_id",),
           "the command id was recorded with a different command digest"),
    Reason("COMMAND_ALREADY_RECORDED", _AE, ("command_id",),
           "the command id is already charged to this run"),
    # --- ABORTED ---------------------------------------------------------------------------------
    Reason("JOURNAL_HEAD_STALE", _AB,
           ("current_head_hash", "current_head_sequence", "expected_head_hash", "run_id"),
           "the journal head moved since the caller read it"),
    Reason("POLICY_REVISION_STALE", _AB, ("current_revision", "expected_revision"),
           "the policy changed since the caller read it"),
    Reason("JOURNAL_CHANGED_DURING_READ", _AB, ("run_id",),
           "the journal changed while the candidate was being evaluated"),
    # --- FAILED_PRECONDITION: admission and execution ----------------------------------------
    Reason("JOURNAL_HEAD_UNSIGNED", _FP,
           ("finding", "head_sequence", "newest_signed_sequence", "run_id"),
           "the run's journal head is not the head this ledger signed last (the database was "
           "written around the ledger: rewritten, truncated or its signatures removed); the "
           "ledger refuses to sign over it. An alarm: compare with witnessed heads"),
    Reason("CANDIDATE_DIGEST_STALE", _FP, ("stale",),
           "a continuity digest the operator reviewed no longer matches the current state"),
    Reason("CANDIDATE_HELD", _FP, ("holds", "requirements"),
           "the candidate is held; only an eligible candidate can be submitted (the candidate's "
           "HandoffPayload is a further status detail)"),
    Reason("RECOVERY_UNRESOLVED", _FP, ("holds", "recovery_id", "request_id", "run_id"),
           "the admissibility check, re-run inside the recovery transaction, leaves the request "
           "unresolved (one PreconditionFailure violation per hold; the check's HandoffPayload is "
           "a further status detail)"),
    Reason("REVIEWED_REPORT_UNVERIFIED", _FP, ("fields",),
           "inside the recovery transaction, a reviewed source-validator or executable-probe "
           "report is not stored intact or does not name the reviewed source revision, "
           "executable identity and provider epoch (one PreconditionFailure violation each)"),
    Reason("CORRECTIVE_PROVIDER_UNVERIFIED", _FP, ("fields",),
           "inside the recovery transaction, the corrective provider configuration document is "
           "not stored intact or does not name the corrective epoch, the rejected epoch it "
           "replaces and the model (one PreconditionFailure violation each)"),
    Reason("CANDIDATE_VERSION_MISMATCH", _FP, ("candidate_version",),
           "the candidate proves another version than the one requested"),
    Reason("RECONSTRUCTION_MISMATCH", _FP, ("candidate", "reconstructed"),
           "the derived checkpoint admission received or rebuilt differs from the one the "
           "candidate proved, or the ledger finds it not bound to the journal's consumed turn"),
    Reason("CONSUMED_RESPONSE_MISMATCH", _FP,
           ("consumed_response_digest", "journal_response_digest", "run_id"),
           "the admitted consumed response is not the journal's newest response_consumed entry"),
    Reason("RUN_NOT_HELD", _FP, ("last_entry_kind", "run_id"),
           "at the expected head the run's last entry is not run_held"),
    Reason("DERIVED_CHECKPOINT_MISSING", _FP, ("digest",),
           "the admission (or the eligible candidate it recomputed) did not carry the derived "
           "checkpoint bytes"),
    Reason("POLICY_DISABLED", _FP, ("policy_revision", "setting"),
           "the continuity policy (or the setting the version needs) is disabled"),
    Reason("POLICY_REVISION_CHANGED", _FP, ("current_revision", "ticket_revision"),
           "the policy revision changed after the candidate or ticket was issued"),
    Reason("POLICY_REVOKED", _FP, ("policy_revision", "revoked", "ticket_revision"),
           "a policy revision since the request was queued disabled continuity or turned off a "
           "switch its workflow needs; the request stops and re-enabling does not revive it"),
    Reason("OPERATOR_AUTHORITY_REVOKED", _FP, ("actor", "missing_roles", "request_id"),
           "the operator who admitted the request no longer holds execution_operator; its "
           "claim and command dispatch stop"),
    Reason("WORKER_SOURCE_CHANGED", _FP, ("mismatched",),
           "the source the worker presents with a write is no longer the run's attempt, source, "
           "configuration or profile"),
    Reason("UNKNOWN_EFFECT_OUTSTANDING", _FP, ("call_ids", "execution_request_id"),
           "a tool call of the run has an unknown durable outcome; nothing more is claimed, "
           "dispatched or completed until it is reconciled"),
    Reason("EXECUTION_REQUEST_CANCELLED", _FP, ("execution_request_id",),
           "the execution request was cancelled; every lease generation of it is fenced"),
    Reason("EXECUTION_REQUEST_NOT_CANCELLABLE", _FP, ("state",),
           "only a queued or claimed execution request can be cancelled"),
    Reason("COMMAND_RECEIPT_FENCED", _FP,
           ("command_id", "execution_request_id", "lease_generation"),
           "the command id was charged under another execution request or a fenced lease "
           "generation; its receipt never satisfies this lease: use a new command id"),
    Reason("CONTINUITY_TICKET_OUTSTANDING", _FP, ("execution_request_id", "run_id"),
           "a native resume (run_started, checkpoint, model request, tool row, command, "
           "claim, hold) outside ExecutionService while a continuity execution request of the "
           "run is queued or claimed; nothing was written"),
    Reason("ACTION_IDENTITY_EXPIRED", _FP, ("expired_at", "reconciliation_id", "recovery_id"),
           "an identical repeat of a recovery or reconciliation after its identity's validity "
           "(7200 s from when it was stored) is no retry; read the saved action back"),
    Reason("NATIVE_JOURNAL_CHANGED", _FP, ("execution_request_id", "kind", "sequence"),
           "a native entry was appended to the run after the execution request was queued (a "
           "changed native ticket): its claim is refused; cancel it and judge the run again"),
    Reason("PROFILE_NOT_QUALIFIED", _FP, ("source_profile",),
           "the run's source profile is not qualified by this release"),
    Reason("PROFILE_DIGEST_MISMATCH", _FP,
           ("presented_digest", "qualified_digest", "source_profile"),
           "the claiming worker's installed code digests to another profile digest than the "
           "one qualified for the run's profile: it is refused, writing nothing (another worker "
           "may claim)"),
    Reason("TICKET_CHANGED", _FP, ("changed", "execution_request_id", "request_id"),
           "the ticket or its settlement rows (migration settlement, ownership claim, the "
           "request it queued) no longer are what the request was admitted against: its claim "
           "is refused; cancel it and judge the run again"),
    Reason("RUN_STARTED_SOURCE_CHANGED", _FP, ("changed", "execution_request_id", "sequence"),
           "a run_started of the run records another task, attempt, source revision or "
           "configuration than the run's: the claim is refused"),
    Reason("CLAIM_OUTSTANDING", _FP, ("execution_request_id",),
           "an admitted continuity execution request is still unclaimed"),
    Reason("CLAIM_CHECK_FAILED", _FP, ("mismatched",),
           "the worker's attempt, source, configuration or profile differs from the run's"),
    Reason("RECOVERY_AUTHORITY_REVOKED", _FP,
           ("actor", "execution_request_id", "missing_roles", "workflow"),
           "the actor of the recovery that queued this request no longer holds the authority "
           "its workflow required; claim and command dispatch stop"),
    Reason("EXECUTION_REQUEST_NOT_QUEUED", _FP, ("state",),
           "the execution request is no longer queued"),
    Reason("EXECUTION_REQUEST_NOT_CLAIMED", _FP, ("state",),
           "the execution request is not claimed"),
    Reason("LEASE_GENERATION_STALE", _FP, ("current_generation",),
           "the lease generation is not the current one"),
    Reason("RECONCILIATION_UNRESOLVED", _FP, ("execution_request_id", "holds"),
           "the admissibility check, re-run inside the reconciliation transaction, leaves the "
           "request held (one PreconditionFailure violation per hold; the check's HandoffPayload "
           "is a further status detail); nothing was written"),
    Reason("RECONCILIATION_STATE_CHANGED", _FP, ("lease_generation", "state"),
           "the execution request's state or lease generation is not the one reviewed"),
    Reason("RECONCILIATION_DIGEST_STALE", _FP, ("current_reconciliation_digest",),
           "the request's snapshot moved since the inspection (e.g. a late write of the old "
           "owner); inspect and review again"),
    Reason("RECONCILIATION_NOT_VERIFIED", _FP, ("execution_request_id", "verifier"),
           "the deployment verifier did not prove cessation, exposure within the reservation "
           "and no effect or retry-safe; nothing was recorded"),
    Reason("LEASE_FENCED_BY_RECONCILIATION", _FP, ("execution_request_id", "state"),
           "the execution request was reconciled: every lease generation of it is fenced for "
           "ever, so a late write of its old owner is refused"),
    Reason("LEASE_EXPIRED", _FP, ("lease_expires_at",), "the lease expired"),
    Reason("ACTIVE_DEADLINE_PASSED", _FP, ("active_deadline",),
           "the request's active deadline has passed"),
    Reason("TIME_BUDGET_UNSUPPORTED", _FP, ("time_budget_protocol",),
           "the run's time budget protocol is not supported"),
    Reason("DATABASE_ISOLATION_UNSUPPORTED", _FP, ("isolation_level", "required_isolation_level"),
           "PostgreSQL runs the ledger's write transactions at another isolation level than READ "
           "COMMITTED (the ledger refuses to start)"),
    # --- FAILED_PRECONDITION: reconstruction refusals --------------------------------------------
    Reason("CHECKPOINT_NOT_CANONICAL", _FP, ("field",),
           f"{_CHECKPOINT}: its bytes are not canonical JSON"),
    Reason("CHECKPOINT_FORMAT_UNSUPPORTED", _FP, ("field",),
           f"{_CHECKPOINT}: its format is not the registered one"),
    Reason("CHECKPOINT_DIGEST_MISMATCH", _FP, ("field",),
           f"{_CHECKPOINT}: the state does not match its sealed digest"),
    Reason("SDK_TRANSITION_UNSUPPORTED", _FP, ("field",),
           f"{_CHECKPOINT}: its runtime is not the registered source (or target)"),
    Reason("INSPECTION_CHAIN_BROKEN", _FP, ("problem", "run_id", "sequence"),
           "a journal inspection requires an intact chain; it breaks at the named sequence and "
           "nothing is inspected"),
    Reason("INSPECTION_ROW_MISMATCH", _FP, ("field", "sequence"),
           "a native row does not name its record by digest, so the record cannot be inspected"),
    Reason("POLICY_EPOCH_UNRECOGNIZED", _FP, ("epoch", "field"),
           "the run's adopted checkpoint-mode policy epoch is not recognized: not in the "
           "compatibility catalog, malformed, or outside a continuity context with a qualified "
           "profile and an enabled finite-lease policy"),
    Reason("POLICY_EPOCH_NOT_CURRENT", _FP, ("current_epoch", "epoch"),
           "ordinary mode preparation and restore accept only the current checkpoint-mode "
           "policy epoch"),
    Reason("HISTORICAL_IDENTITY_UNREGISTERED", _FP, ("field",),
           f"{_HISTORICAL}: its validator or pinned source is not registered"),
    Reason("SOURCE_READER_UNPINNED", _FP, ("expected", "field", "found", "name"),
           "a version-2 or read-only observation proof does not pin the published historical "
           "source-reader implementation: it is not installed with its pinned hash "
           "(reconstruction), or the derived checkpoint names none or another (the ledger's "
           "commit); nothing was written"),
    Reason("MIGRATION_FIELD_REFUSED", _FP, ("field",),
           "a checkpoint field cannot be migrated to the target SDK (JSON Pointer in field)"),
    Reason("MIGRATION_COUNTER_MISSING", _FP, ("field",), "a mandatory usage counter is missing"),
    Reason("MIGRATION_COUNTER_UNEXPECTED", _FP, ("field",), "a usage counter is not recognised"),
    Reason("MIGRATION_COUNTER_OUT_OF_BOUNDS", _FP, ("field",),
           "a usage counter is not a bounded integer"),
    Reason("CONTRACT_MIGRATION_REFUSED", _FP, ("element",),
           "the tool contract differs beyond the two permitted changes"),
    Reason("CONSUMED_RESPONSE_UNPARSEABLE", _FP, (),
           "the pinned SDK cannot consume the stored response"),
    Reason("HISTORY_PREFIX_CHANGED", _FP, (), "reconstruction would change the stored history"),
    Reason("OBSERVATION_RECONSTRUCTION_DIVERGED", _FP, ("element",),
           "the sealed reconstruction of a consumed turn with an unavailable evidence "
           "observation would not keep the raw response, history, state, limits, contract, usage "
           "or the exact retained results (element names it)"),
    Reason("PENDING_REQUEST_NOT_SENT", _FP, ("element",),
           "the pinned SDK built or sent no provider request from the derived checkpoint (e.g. "
           "a usage limit refuses it first)"),
    Reason("PENDING_STATE_DIVERGED", _FP, ("element",),
           "the request the pinned SDK builds from the derived checkpoint does not carry its "
           "exact history, settings, tool definitions, usage or limits (element names it)"),
    Reason("UNSUPPORTED_RESPONSE_CONTENT", _FP, ("element",),
           f"{_ANALYSIS}: it holds content other than tool calls"),
    Reason("DUPLICATE_TOOL_CALL_ID", _FP, ("element",),
           f"{_ANALYSIS}: a tool call id is not unique"),
    Reason("UNKNOWN_TOOL_CALL", _FP, ("element",),
           f"{_ANALYSIS}: a called tool is not in the contract"),
    Reason("EVIDENCE_CALL_COUNT", _FP, ("element",),
           f"{_ANALYSIS}: it does not hold exactly one read_run_evidence call"),
    Reason("EVIDENCE_QUERY_NOT_ADVERTISED", _FP, ("element",),
           f"{_ANALYSIS}: the old advertised schema rejects the evidence query"),
    Reason("EVIDENCE_QUERY_VALID", _FP, ("element",),
           f"{_ANALYSIS}: the pinned validator accepts the query, so it was not an invalid read"),
    Reason("SIBLING_CALL_REFUSED", _FP, ("element",),
           f"{_ANALYSIS}: a sibling call is not an allowed observation of the version"),
    # --- RESOURCE_EXHAUSTED ----------------------------------------------------------------------
    Reason("PER_RUN_TICKET_LIMIT", _RE, ("count", "limit"),
           "the run has as many pending tickets as the policy allows"),
    Reason("PENDING_TICKET_LIMIT", _RE, ("count", "limit"),
           "the factory has as many pending tickets as the policy allows"),
    Reason("COMMAND_LIMIT_REACHED", _RE, ("limit", "used"),
           "the run's command limit is used up; the command is refused before it runs"),
    Reason("JOURNAL_FOLLOWERS_EXHAUSTED", _RE, ("limit", "retry_after_ms"),
           "as many journal followers as the ledger allows are open; nothing was read: retry "
           "after the RetryInfo delay, or read pages"),
    Reason("JOURNAL_FOLLOWERS_PER_CALLER_EXHAUSTED", _RE, ("limit", "retry_after_ms"),
           "the caller already holds as many journal followers as one caller may "
           "(FORGE_MAX_FOLLOWERS_PER_CALLER); nothing was read: end one, or retry after the "
           "RetryInfo delay"),
    Reason("JOURNAL_STREAMS_EXHAUSTED", _RE, ("limit", "retry_after_ms"),
           "as many journal streams and streamed snapshots (that do not follow) as the ledger "
           "allows are open; nothing was read: retry after the RetryInfo delay"),
    Reason("JOURNAL_STREAMS_PER_CALLER_EXHAUSTED", _RE, ("limit", "retry_after_ms"),
           "the caller already holds half the ledger's journal streams and streamed snapshots; "
           "nothing was read: retry after the RetryInfo delay"),
    Reason("SERVER_BUSY", _RE, ("limit", "retry_after_ms"),
           "the service holds as many calls as it runs and queues; nothing was done: retry after "
           "the RetryInfo delay (also sent as grpc-retry-pushback-ms)"),
    Reason("RECONSTRUCTION_TIME_LIMIT", _RE, ("bound", "max_seconds"),
           "the pinned SDK's work on these bytes reached the reconstruction service's wall-time "
           "or CPU-time limit (FORGE_RECONSTRUCTION_SECONDS) and was stopped; the same bytes "
           "are stopped again: do not retry them"),
    Reason("CALL_DEADLINE_PASSED", ErrorKind.DEADLINE_EXCEEDED, (),
           "the call's deadline passed during work that grows with its input; the work stopped"),
    Reason("CALL_ABANDONED", ErrorKind.CANCELLED, (),
           "the caller cancelled during work that grows with its input; the work stopped"),
    Reason("MESSAGE_TOO_LARGE", _RE, ("limit_bytes", "size_bytes"),
           "the request exceeds the method's size limit (large only where bytes are uploaded); "
           "it was not parsed"),
    Reason("RUN_SNAPSHOT_TOO_LARGE", _RE, ("byte_limit", "entries", "entry_limit", "run_id"),
           "the run's snapshot does not fit one message (GetRunSnapshot); nothing was sent: read "
           "it with ReadRunSnapshot, which streams it"),
    # --- UNAUTHENTICATED / PERMISSION_DENIED -----------------------------------------------------
    Reason(
        "CREDENTIALS_MISSING",
        _UA,
        (),
        "the call carries no token, and no client certificate that names a principal",
    ),
    Reason("CREDENTIALS_MALFORMED", _UA, (), "the authorization metadata is not 'Bearer <token>'"),
    Reason("CREDENTIALS_UNKNOWN", _UA, (), "the bearer token is not recognised"),
    Reason("ROLE_REQUIRED", _PD, ("identity", "method", "required_roles"),
           "the identity holds none of the roles the method allows"),
    Reason("NOT_LEASE_OWNER", _PD, ("identity",), "the caller does not hold the lease"),
    Reason("WORKER_APPEND_NOT_LEASED", _PD, ("identity", "kind"),
           "a worker appends only its own model and tool records, and a model or tool record "
           "naming a continuity execution request is appended only under its lease (a platform "
           "writer's too): each names an execution request of this run and the lease generation "
           "its holder holds"),
    Reason("CANCEL_NOT_PERMITTED", _PD, ("identity", "operator"),
           "only the operator who admitted the request, with current authority, or a factory "
           "administrator may cancel it"),
    # --- UNIMPLEMENTED / UNAVAILABLE / INTERNAL --------------------------------------------------
    Reason("NOT_YET_AVAILABLE", _UI, ("method",), "in the contract, not delivered in this release"),
    Reason("CANDIDATE_SOURCES_UNCONFIGURED", _UV, (),
           "the candidate server has no ledger or reconstruction connection"),
    Reason("SERVICE_UNREACHABLE", _UV, ("service", "target"),
           "the client could not reach the named service at the named address (nothing "
           "listens there, or the network refused); safe to retry once it runs"),
    Reason("STREAM_TIME_LIMIT", _UV, ("max_seconds", "next_sequence"),
           "the journal stream reached the ledger's time limit (FORGE_MAX_STREAM_SECONDS) and "
           "ended; every entry before next_sequence was delivered: resume from it"),
    Reason("DATABASE_UNAVAILABLE", _UV, (),
           "the ledger lost its database connection; a write's outcome is unknown until a "
           "same-ID retry or read-back settles it"),
    Reason("DATABASE_TIMEOUT", _UV, ("timeout",),
           "a database lock or statement outlasted the ledger's timeout (timeout=lock_timeout or "
           "statement_timeout); nothing was written, retry with the same ID after a backoff"),
    Reason("INTERNAL_ERROR", _IN, (),
           "an unexpected exception; the details are in the service log"),
    Reason("CANDIDATE_PROOF_MISSING", _IN, (), "no hold applies but no proof was built"),
    Reason("RECONSTRUCTION_REASON_UNMAPPED", _IN, ("origin", "reconstruction_reason"),
           "reconstruction reported a reason the candidate has no hold for (fails closed)"),
    Reason("TARGET_SDK_MISMATCH", _IN, ("field",),
           "the installed SDK is not the one reconstruction is pinned to"),
    Reason("SEALED_REPLAY_FAILED", _IN, (),
           "the sealed replay did not parse the consumed response"),
    Reason("SEALED_TRANSPORT_VIOLATION", _IN, (),
           "more than one request, or a callback, left the sealed transport"),
    Reason("CONTRACT_CAPTURE_FAILED", _IN, (), "the installed tool contract could not be captured"),
)
# fmt: on


def _bare(name: str, code: ErrorKind, meaning: str) -> Reason:
    return Reason(name, code, (), meaning, bare_status=True)


_NO_INFO = "a peer answered {} without ErrorInfo"
# The reasons shared.runtime.errors.bare_status_error gives a status that carried no ErrorInfo:
# fixed
# message, original details only in the log.
_BARE_STATUS_REASONS: tuple[Reason, ...] = (
    _bare(
        "DOWNSTREAM_DEADLINE_EXCEEDED",
        ErrorKind.DEADLINE_EXCEEDED,
        "a downstream call did not finish before its deadline",
    ),
    _bare("DOWNSTREAM_CANCELLED", ErrorKind.CANCELLED, "a downstream call was cancelled"),
    _bare(
        "UNAVAILABLE",
        _UV,
        "the called service cannot be reached (connection refused, shutting down); safe to retry",
    ),
    _bare(
        "RESOURCE_EXHAUSTED",
        _RE,
        f"{_NO_INFO.format('RESOURCE_EXHAUSTED')}, e.g. a message over the size limit",
    ),
    _bare(
        "UNIMPLEMENTED", _UI, f"{_NO_INFO.format('UNIMPLEMENTED')}: it does not serve the method"
    ),
    _bare("INTERNAL", _IN, f"{_NO_INFO.format('INTERNAL, UNKNOWN, DATA_LOSS or OUT_OF_RANGE')}"),
    *(
        _bare(kind.name, kind, _NO_INFO.format(kind.name))
        for kind in (_IA, _NF, _AE, _AB, _FP, _UA, _PD)
    ),
)


def _index(reasons: tuple[Reason, ...]) -> Mapping[str, Reason]:
    index: dict[str, Reason] = {}
    for reason in reasons:
        if reason.name in index:
            raise ValueError(f"reason {reason.name} catalogued twice")
        index[reason.name] = reason
    return MappingProxyType(index)


CATALOGUE: Mapping[str, Reason] = _index(_REASONS + _BARE_STATUS_REASONS)
