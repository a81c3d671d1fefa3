"""The checks of the native admission transaction, without storage."""

from __future__ import annotations

from services.ledger.domain.policy import PolicyRevision
from services.ledger.domain.runs import check_identifier
from shared.continuity.canonical import is_digest, sha256_digest
from shared.continuity.commit_admission import CommitAdmission
from shared.continuity.identifiers import identity_violations
from shared.contract.terms import DIGEST_NAMES, MAX_WINDOW_SECONDS, SUPPORTED_VERSIONS
from shared.runtime.errors import (
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    PreconditionViolation,
    ResourceExhausted,
)


def validate_admission(admission: CommitAdmission) -> None:
    """INVALID_ARGUMENT ADMISSION_INVALID naming every field the ledger refuses."""
    check_identifier("run_id", admission.run_id)
    check_identifier("request_id", admission.request_id)
    violations = identity_violations("operator_identity", admission.operator_identity)
    for name in (
        "request_content_digest",
        "expected_head_hash",
        "derived_checkpoint_digest",
        "consumed_response_digest",
        "witness_digest",
    ):
        if not is_digest(getattr(admission, name)):
            violations.append(FieldViolation(name, "must be sha256:<64 hex>"))
    violations += [
        FieldViolation(f"digests.{name}", "must be sha256:<64 hex>")
        for name in DIGEST_NAMES
        if not is_digest(admission.digests.get(name, ""))
    ]
    if admission.version not in SUPPORTED_VERSIONS:
        supported = " or ".join(str(v) for v in SUPPORTED_VERSIONS)
        violations.append(FieldViolation("version", f"must be {supported}"))
    if not 1 <= admission.valid_for_seconds <= MAX_WINDOW_SECONDS:
        violations.append(
            FieldViolation("valid_for_seconds", f"must be in 1..{MAX_WINDOW_SECONDS}")
        )
    if admission.policy_revision <= 0:
        violations.append(FieldViolation("policy_revision", "must be positive"))
    if (
        admission.derived_checkpoint
        and sha256_digest(admission.derived_checkpoint) != admission.derived_checkpoint_digest
    ):
        violations.append(
            FieldViolation("derived_checkpoint", "does not match derived_checkpoint_digest")
        )
    if violations:
        raise InvalidArgument(
            "ADMISSION_INVALID",
            "; ".join(f"{v.field}: {v.description}" for v in violations),
            field_violations=violations,
        )


def check_policy_for_admission(policy: PolicyRevision, decided_revision: int, version: int) -> None:
    if not policy.settings.enabled:
        raise FailedPrecondition(
            "POLICY_DISABLED",
            "invalid-read continuity is disabled by policy",
            metadata={"policy_revision": str(policy.revision)},
        )
    if policy.revision != decided_revision:
        raise FailedPrecondition(
            "POLICY_REVISION_CHANGED",
            f"policy moved from revision {decided_revision} to {policy.revision}; "
            "read a new candidate",
            metadata={"current_revision": str(policy.revision)},
            precondition_violations=[
                PreconditionViolation(
                    "POLICY_REVISION", "policy", f"current revision is {policy.revision}"
                )
            ],
        )
    if version == 2 and not policy.settings.allow_unavailable_source_observations:
        raise FailedPrecondition(
            "POLICY_DISABLED",
            "version-2 admissions need allow_unavailable_source_observations",
            metadata={"setting": "allow_unavailable_source_observations"},
        )


def check_capacity(policy: PolicyRevision, *, per_run: int, pending: int) -> None:
    if per_run >= policy.settings.per_run_ticket_limit:
        raise ResourceExhausted(
            "PER_RUN_TICKET_LIMIT",
            f"the run already has {per_run} tickets (limit {policy.settings.per_run_ticket_limit})",
            metadata={"limit": str(policy.settings.per_run_ticket_limit), "count": str(per_run)},
        )
    if pending >= policy.settings.pending_ticket_limit:
        raise pending_limit_reached(policy.settings.pending_ticket_limit, pending)


def pending_limit_reached(limit: int, pending: int) -> ResourceExhausted:
    """The pending cap's refusal: ``pending`` requests counted against ``limit`` (the count a
    refused conditional consumption reads afterwards may already be lower again)."""
    return ResourceExhausted(
        "PENDING_TICKET_LIMIT",
        f"{pending} tickets are pending (limit {limit})",
        metadata={"limit": str(limit), "count": str(pending)},
    )
