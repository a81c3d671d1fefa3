"""The read-only observation's descriptor (ADR 0013): what its read custody adds to the one
admissibility check, what its commit checks and records, and what an operator reads about it.

The custody is judged by ``custody.py`` beside this file; the commit binds the candidate's
derived checkpoint to the journal's turn with ``binding.py`` (R.4c), stores it and requeues the
request from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from shared.continuity.admissibility_facts import ActionFacts, Situation
from shared.continuity.derived_checkpoint import DerivedCheckpoint
from shared.continuity.recovery.readonly_observation.binding import (
    OBSERVATION_UNAVAILABLE,
    check_binding,
)
from shared.continuity.recovery.readonly_observation.custody import (
    READONLY_OBSERVATION,
    REQUIRED_ROLES,
    ObservationCustody,
    observation_custody,
    readonly_observation_facts,
)
from shared.continuity.recovery.rejected_boundary.custody import REJECTED_BOUNDARY
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
