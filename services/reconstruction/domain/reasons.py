"""Every reason the reconstruction service gives for not continuing a consumed response.

Callers (the candidate) map each one to their own vocabulary; these sets are what such a map must
cover exactly. tests/reconstruction/test_reasons.py checks them against the reasons the code
actually raises, so a new reason cannot be added without updating them (and then its callers).
"""

from __future__ import annotations

from typing import Final

#: ``AnalysisHold.reason`` values: findings of AnalyzeConsumedResponse (common and per version).
#: ReconstructInvalidRead raises the same reasons as FAILED_PRECONDITION when a finding applies.
ANALYSIS_REASONS: Final = frozenset(
    {
        "DUPLICATE_TOOL_CALL_ID",
        "EVIDENCE_CALL_COUNT",
        "EVIDENCE_QUERY_NOT_ADVERTISED",
        "EVIDENCE_QUERY_VALID",
        "SIBLING_CALL_REFUSED",
        "UNKNOWN_TOOL_CALL",
        "UNSUPPORTED_RESPONSE_CONTENT",
    }
)

#: FAILED_PRECONDITION / INVALID_ARGUMENT reasons of AnalyzeConsumedResponse,
#: ReconstructInvalidRead and ReproducePendingRequest besides the findings above: the checkpoint,
#: its identities and SDK projection, the consumed response's SDK parse, the tool-contract
#: migration, the reproduced pending request and the request.
#: INTERNAL errors (TARGET_SDK_MISMATCH, SEALED_*, CONTRACT_CAPTURE_FAILED) are faults of the
#: service, not refusals of the input, and are not listed.
REFUSAL_REASONS: Final = frozenset(
    {
        "CHECKPOINT_DIGEST_MISMATCH",
        "CHECKPOINT_FORMAT_UNSUPPORTED",
        "CHECKPOINT_MALFORMED",
        "CHECKPOINT_NOT_CANONICAL",
        "CONSUMED_AT_INVALID",
        "CONSUMED_RESPONSE_UNPARSEABLE",
        "CONTRACT_MIGRATION_REFUSED",
        "FIELD_INVALID",
        "FIELD_REQUIRED",
        "HISTORICAL_IDENTITY_UNREGISTERED",
        "HISTORY_PREFIX_CHANGED",
        "MIGRATION_COUNTER_MISSING",
        "MIGRATION_COUNTER_OUT_OF_BOUNDS",
        "MIGRATION_COUNTER_UNEXPECTED",
        "MIGRATION_FIELD_REFUSED",
        "OBSERVATION_RECONSTRUCTION_DIVERGED",
        "PENDING_REQUEST_NOT_SENT",
        "PENDING_STATE_DIVERGED",
        "SDK_TRANSITION_UNSUPPORTED",
        "SOURCE_READER_UNPINNED",
        "VERSION_UNSUPPORTED",
    }
)
