"""Checks and proof specific to invalid-read continuity (versions 1 and 2): the run is held on
a consumed read_run_evidence call, reconstruction's analysis of that call refuses nothing, version
2's policy setting, and the reconstruction itself.
"""

from __future__ import annotations

from typing import Final

from services.candidate.domain.checks.reconstruction_reasons import finding_hold, refusal_hold
from services.candidate.domain.facts import Facts, Refusal
from services.candidate.domain.model import Hold, HoldReason, Proof, ResponseAnalysis, hold
from shared.continuity.canonical import CanonicalJsonError, digest_of, parse_json

EVIDENCE_TOOL: Final = "read_run_evidence"
# The version that admits unavailable list_files observations under their policy setting.
OBSERVATION_VERSION: Final = 2


def error_message_only(facts: Facts) -> list[Hold]:
    """run_held names a consumed read_run_evidence call (an error message alone is no proof)."""
    held = facts.final_held
    if held is None:
        return []
    call_id = held.text("call_id")
    calls = facts.calls
    evidence = [c.call_id for c in calls if c.tool_name == EVIDENCE_TOOL] if calls else []
    if (
        facts.closure.consume is None
        or not call_id
        or (calls is not None and call_id not in evidence)
    ):
        return [
            hold(
                HoldReason.ERROR_MESSAGE_ONLY,
                str(held.sequence),
                "run_held names no consumed read_run_evidence call; a logged error message "
                "alone supplies no authority",
            )
        ]
    return []


def observation_policy(facts: Facts) -> list[Hold]:
    """Version 2 needs the policy to allow unavailable source observations."""
    policy = facts.policy
    if facts.version != OBSERVATION_VERSION or policy.allow_unavailable_source_observations:
        return []
    return [
        hold(
            HoldReason.POLICY_DISABLED,
            "allow_unavailable_source_observations",
            f"policy revision {policy.revision} does not allow unavailable source "
            "observations (version 2)",
        )
    ]


def _refused(facts: Facts, refusal: Refusal) -> Hold:
    subject = refusal.names or facts.closure.response_digest
    return refusal_hold(
        refusal.reason, subject, refusal.message, facts.calls or (), typed=refusal.typed
    )


def analysis(facts: Facts) -> list[Hold]:
    """Reconstruction's findings on the consumed response for the version, or its refusal."""
    if facts.analysis_refusal is not None:
        return [_refused(facts, facts.analysis_refusal)]
    if facts.analysis is None:
        return []  # a blob is missing: already held by the closure
    calls = facts.analysis.tool_calls
    return [
        finding_hold(f.reason, f.element, f.message, calls)
        for f in facts.analysis.holds(facts.version)
    ]


def reconstruction(facts: Facts) -> list[Hold]:
    """Reconstruction's refusal to derive the continuation, if it refused."""
    refusal = facts.reconstruction_refusal
    return [_refused(facts, refusal)] if refusal is not None else []


# --- the proof ------------------------------------------------------------------------------


def proven(facts: Facts) -> bool:
    """A proof is complete only with a reconstruction."""
    return facts.reconstruction is not None


def proof(facts: Facts) -> Proof:
    """The eligibility evidence (partial when held)."""
    closure, found, rebuilt = facts.closure, facts.analysis, facts.reconstruction
    return Proof(
        checkpoint_digest=closure.checkpoint_digest,
        consumed_response_digest=closure.response_digest,
        call_id=found.evidence_call_id if found else "",
        query_json=found.evidence_query_json if found else "",
        accepted_by_advertised_schema=bool(found and found.accepted_by_advertised_schema),
        rejected_by_pinned_validator=bool(found and found.rejected_by_pinned_validator),
        validator_error=found.validator_error if found else "",
        runtime_identity=_runtime_identity(found),
        validator_identity=found.validator_identity if found else "",
        derived_checkpoint_digest=rebuilt.derived_checkpoint_digest if rebuilt else "",
        witness_digest=rebuilt.witness_digest if rebuilt else "",
        consume_sequence=closure.consume.sequence if closure.consume else 0,
    )


def rejected_evidence_call(facts: Facts) -> str:
    """The read_run_evidence call the pinned validator rejected: settled by the continuation,
    so the handoff does not list it as unresolved."""
    found = facts.analysis
    return (
        found.evidence_call_id if found is not None and found.rejected_by_pinned_validator else ""
    )


def _runtime_identity(found: ResponseAnalysis | None) -> str:
    """The registered runtime identity, bound by the digest of its canonical record."""
    if found is None or not found.runtime_identity_json:
        return ""
    try:
        return digest_of(parse_json(found.runtime_identity_json))
    except CanonicalJsonError:
        return ""
