"""A consumed turn with an unavailable evidence observation (the read-only observation recovery):
what its read custody adds to the one admissibility check, and how its commit binds the new
derived checkpoint to the journal's turn.

The custody is judged by ``shared.continuity.readonly_observation``. The candidate's sealed
reconstruction yields the derived checkpoint; the commit cannot reach reconstruction, so it checks
the checkpoint's source digests and appended results against the journal and the retained result
blobs (R.4c), stores it and requeues the request from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from shared.continuity.admissibility_facts import ActionFacts, Situation
from shared.continuity.canonical import (
    CanonicalJsonError,
    digest_of,
    intact_blob,
    parse_json,
)
from shared.continuity.derived_checkpoint import DerivedCheckpoint
from shared.continuity.derived_format import DerivedClaims
from shared.continuity.readonly_observation import (
    EVIDENCE_TOOL,
    READONLY_OBSERVATION,
    REQUIRED_ROLES,
    ObservationCustody,
    observation_custody,
    readonly_observation_facts,
)
from shared.continuity.recovery.workflow import (
    Applies,
    ContentOf,
    Evidence,
    Inputs,
    Rpc,
    Rpcs,
    Wording,
    Workflow,
)
from shared.continuity.rejected_boundary import REJECTED_BOUNDARY
from shared.continuity.source_reader import check_source_reader_pin
from shared.runtime.errors import FailedPrecondition, FieldViolation, InvalidArgument

#: The fixed result reconstruction appends for the unavailable evidence observation.
OBSERVATION_UNAVAILABLE: Final = {
    "status": "observation_unavailable",
    "reason": "original_read_result_not_retained",
}


def _derived(inputs: Inputs) -> DerivedCheckpoint:
    if inputs.derived is None:  # refused earlier by Workflow.input_violations
        raise ValueError("the read-only observation needs its derived checkpoint")
    return inputs.derived


@dataclass(frozen=True)
class ReadonlyObservation(Workflow):
    """Exact pure-read custody of the consumed turn resolves the worker claim."""

    def judge(self, evidence: Evidence) -> ObservationCustody:
        return observation_custody(evidence.rows, evidence.history, evidence.source_revision)

    def facts(self, evidence: Evidence, judged: Any, situation: Situation) -> ActionFacts:
        return readonly_observation_facts(
            evidence.history,
            judged,
            situation,
        )

    def failed_sequence(self, evidence: Evidence, judged: Any) -> int:
        custody: ObservationCustody = judged
        return custody.failed_sequence

    def commit_checks(self, evidence: Evidence, judged: Any, content_of: ContentOf) -> None:
        check_binding(_derived(evidence.inputs), judged, content_of)

    def witness_fields(self, evidence: Evidence, judged: Any) -> dict[str, object]:
        """The consumed turn and its reconstruction. The original unknown tool outcome stays
        unchanged; this entry explains the continuation."""
        derived, custody = _derived(evidence.inputs), judged
        return {
            "derived_checkpoint_digest": derived.digest,
            "observation_witness_digest": derived.witness_digest,
            "source_checkpoint_digest": custody.pending_checkpoint_digest,
            "consumed_response_digest": custody.consumed_response_digest,
            "unavailable_call_id": custody.evidence_call_id,
            "retained_results": dict(sorted(custody.retained.items())),
            "appended_result": dict(OBSERVATION_UNAVAILABLE),
        }

    def saved_fields(self, inputs: Inputs) -> dict[str, str]:
        return {"derived_checkpoint_digest": _derived(inputs).digest}


def _mismatch(detail: str, derived: DerivedCheckpoint) -> FailedPrecondition:
    return FailedPrecondition(
        "RECONSTRUCTION_MISMATCH",
        f"the derived checkpoint is not bound to the journal's consumed turn: {detail}",
        metadata={"candidate": derived.digest, "reconstructed": ""},
    )


def check_binding(
    derived: DerivedCheckpoint, custody: ObservationCustody, content_of: ContentOf
) -> None:
    """R.4c The derived checkpoint continues from the checkpoint the consumed request was sent
    from, with the consumed response, whose calls carry exactly the arguments their grant rows
    digest, and appends exactly the retained results (stored intact, compared as canonical JSON)
    and the fixed unavailable observation for the evidence call."""
    claims = DerivedClaims.read(derived.content)
    if not claims.is_json:
        raise InvalidArgument(
            "RECOVERY_INVALID",
            "derived_checkpoint is not JSON",
            field_violations=[FieldViolation("derived_checkpoint", "not JSON")],
        )
    if not claims.records:
        raise _mismatch("no source or reconstruction record", derived)
    if claims.checkpoint_digest != custody.pending_checkpoint_digest:
        raise _mismatch("another source checkpoint", derived)
    if claims.raw_response_digest != custody.consumed_response_digest:
        raise _mismatch("another consumed response", derived)
    if claims.consumed_at != custody.consumed_at:
        raise _mismatch("another consumption time", derived)
    if claims.witness_digest != derived.witness_digest:
        raise _mismatch("another witness", derived)
    _check_arguments(claims.messages, custody, derived)
    appended = claims.appended_results
    results = {
        str(item.get("tool_call_id")): item.get("content")
        for item in (appended if isinstance(appended, list) else [])
        if isinstance(item, dict)
    }
    if sorted(results) != sorted(call_id for call_id, _ in custody.calls):
        raise _mismatch("the appended results are not the granted calls'", derived)
    # a reused source-reader result: the proof pins the published historical source reader
    check_source_reader_pin(claims)
    for call_id, name in custody.calls:
        if name == EVIDENCE_TOOL:
            expected: Any = OBSERVATION_UNAVAILABLE
        else:
            stored = intact_blob(content_of, custody.retained.get(call_id, ""))
            if stored is None:
                raise _mismatch(f"the retained result of {call_id} is not stored", derived)
            expected = parse_json(stored)
        if digest_of(results[call_id]) != digest_of(expected):
            raise _mismatch(f"the result appended for {call_id} is not exact", derived)


def _check_arguments(
    messages: Any, custody: ObservationCustody, derived: DerivedCheckpoint
) -> None:
    """Each granted call's argument digest is the digest of its arguments in the consumed
    response the derived checkpoint carries."""
    consumed = consumed_call_args(messages)
    for call_id, _ in custody.calls:
        if consumed.get(call_id) != custody.args_digests.get(call_id):
            raise _mismatch(
                f"the granted argument digest of {call_id} is not the consumed response's", derived
            )


def consumed_call_args(messages: Any) -> dict[str, str]:
    """call id → ``digest_of`` the parsed arguments of each tool call of the consumed response the
    derived checkpoint's history carries (its second-to-last message, the reconstructed turn's
    response); "" for arguments that are not JSON. Empty when there is no such message."""
    if not isinstance(messages, list) or len(messages) < 2 or not isinstance(messages[-2], dict):
        return {}
    parts = messages[-2].get("parts")
    found: dict[str, str] = {}
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict) or part.get("part_kind") != "tool-call":
            continue
        args = part.get("args")
        if isinstance(args, str):
            try:
                args = parse_json(args)
            except CanonicalJsonError:
                found[str(part.get("tool_call_id"))] = ""
                continue
        found[str(part.get("tool_call_id"))] = digest_of(args)
    return found


WORKFLOW: Final = ReadonlyObservation(
    name=READONLY_OBSERVATION,
    number=3,
    action="request_readonly_observation_recovery",
    acknowledgements=(
        "acknowledge_unavailable_observation",
        "acknowledge_no_original_callback_replay",
        "acknowledge_same_request_attempt_and_budgets",
        "acknowledge_finite_ownership_lease",
    ),
    roles=REQUIRED_ROLES,
    rpcs=Rpcs(
        candidate=Rpc("GetReadonlyObservationCandidate"),
        submit=Rpc("RequestReadonlyObservationRecovery"),
        read=Rpc("GetReadonlyObservationRecovery"),
    ),
    policy_switch="allow_readonly_observation_recovery",
    inputs=frozenset({"derived"}),
    witness_kind="readonly_observation_recovery",
    title="the read-only observation",
    # the consumed turn follows the provider-refusal recovery's requeue and second claim
    applies=Applies(claimed=True, follows=(REJECTED_BOUNDARY,)),
    wording=Wording(
        heading="Unavailable read-only observation",
        situation="The worker's consumed turn asked for an evidence read whose result was not "
        "retained: the same request continues once, with that observation explicitly "
        "unavailable and the retained read results reused exactly.",
        review="Review unavailable observation",
        note="Reviewing queues nothing. The unknown evidence result stays unknown: no original "
        "callback runs again, no provider request is made and no command is charged.",
        acknowledgements=(
            (
                "acknowledge_unavailable_observation",
                "The evidence observation stays unavailable; its original result is not known.",
            ),
            (
                "acknowledge_no_original_callback_replay",
                "No original tool callback is replayed.",
            ),
            (
                "acknowledge_same_request_attempt_and_budgets",
                "The same request, attempt and budgets continue; original usage stays charged.",
            ),
            (
                "acknowledge_finite_ownership_lease",
                "Only a finite ownership lease for the same attempt is granted.",
            ),
        ),
    ),
)
