"""The read-only observation candidate's custody and reconstruction check (spec: "A consumed turn
with an unavailable evidence observation").

The journal's read custody is judged by the workflow's package
(``shared.continuity.recovery.readonly_observation``; the ledger judges it again at commit). Here
the stored bytes it names are read — the derived checkpoint the consumed request was sent from,
the consumed raw response and each exact retained list result — and handed to reconstruction's
sealed ``ReconstructReadonlyObservation``. A missing or damaged blob, or a refused
reconstruction, is the hold ``OBSERVATION_NOT_PROVEN``; the reconstructed derived
checkpoint's digest joins the candidate digest, so admission's recomputation sees the same.

One pass of proof: the candidate answers admission with the derived checkpoint bytes and the
witness digest it reconstructed (the commit inputs); admission checks the bytes against the digest
and does not fetch or reconstruct again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from services.candidate.domain.facts import is_refusal
from services.candidate.domain.model import Hold, HoldReason, hold
from services.candidate.domain.recovery.facts import RECOVERY_CHECKS, RecoveryFacts
from services.candidate.domain.sources import CandidateSources
from services.candidate.domain.workflows import RecoveryEvidence, RecoveryWorkflow
from shared.continuity.canonical import intact_blob
from shared.continuity.recovery import DerivedCheckpoint
from shared.continuity.recovery.readonly_observation.binding import check_binding
from shared.continuity.recovery.readonly_observation.custody import ObservationCustody
from shared.runtime.errors import DomainError


@dataclass(frozen=True)
class ObservationCheck:
    """The holds of the check and the reconstruction ("" and no bytes when none)."""

    holds: tuple[Hold, ...]
    derived_checkpoint_digest: str
    witness_digest: str
    derived_checkpoint: bytes = b""


@dataclass(frozen=True)
class ObservationProof:
    """What admission needs to reconstruct again and compare (the candidate's proof)."""

    pending_checkpoint_digest: str
    consumed_response_digest: str
    consumed_at: str
    retained_result_digests: Mapping[str, str]
    evidence_call_id: str
    derived_checkpoint_digest: str
    witness_digest: str

    @classmethod
    def of(cls, custody: ObservationCustody, check: ObservationCheck) -> ObservationProof:
        return cls(
            pending_checkpoint_digest=custody.pending_checkpoint_digest,
            consumed_response_digest=custody.consumed_response_digest,
            consumed_at=custody.consumed_at,
            retained_result_digests=dict(custody.retained),
            evidence_call_id=custody.evidence_call_id,
            derived_checkpoint_digest=check.derived_checkpoint_digest,
            witness_digest=check.witness_digest,
        )


def observation_check(sources: CandidateSources, custody: ObservationCustody) -> ObservationCheck:
    """Reconstruct the consumed turn from the stored bytes the custody names."""
    if custody.problems:
        return ObservationCheck((), "", "")  # the admissibility check already holds on them
    missing: list[Hold] = []
    checkpoint = intact_blob(sources.blob, custody.pending_checkpoint_digest)
    response = intact_blob(sources.blob, custody.consumed_response_digest)
    for digest, content in (
        (custody.pending_checkpoint_digest, checkpoint),
        (custody.consumed_response_digest, response),
    ):
        if content is None:
            missing.append(hold(HoldReason.CLOSURE_INCOMPLETE, digest, "not stored intact"))
    retained: dict[str, str] = {}
    for call_id, digest in sorted(custody.retained.items()):
        content = intact_blob(sources.blob, digest)
        if content is None:
            missing.append(
                hold(HoldReason.CLOSURE_INCOMPLETE, digest, f"the result of {call_id} is lost")
            )
            continue
        try:
            retained[call_id] = content.decode("utf-8")
        except UnicodeDecodeError:
            missing.append(hold(HoldReason.OBSERVATION_NOT_PROVEN, call_id, "not JSON text"))
    if missing or checkpoint is None or response is None:
        return ObservationCheck(tuple(missing), "", "")
    try:
        found = sources.reconstruct_observation(checkpoint, response, custody.consumed_at, retained)
    except DomainError as refused:
        if not is_refusal(refused):
            raise
        element = refused.metadata.get("element") or refused.metadata.get("field") or "-"
        return ObservationCheck(
            (
                hold(
                    HoldReason.OBSERVATION_NOT_PROVEN,
                    element,
                    f"sealed reconstruction refused: {refused.reason}: {refused.message}",
                ),
            ),
            "",
            "",
        )
    # What the commit will check of it (R.4c), shown here as a hold rather than a refusal then:
    # among it, each call's granted argument digest against the consumed response's arguments.
    try:
        check_binding(
            DerivedCheckpoint(
                found.derived_checkpoint, found.derived_checkpoint_digest, found.witness_digest
            ),
            custody,
            sources.blob,
        )
    except DomainError as unbound:
        detail = f"{unbound.reason}: {unbound.message}"
        return ObservationCheck((hold(HoldReason.OBSERVATION_NOT_PROVEN, "-", detail),), "", "")
    return ObservationCheck(
        (), found.derived_checkpoint_digest, found.witness_digest, found.derived_checkpoint
    )


def evidence(sources: CandidateSources, facts: RecoveryFacts, judged: Any) -> RecoveryEvidence:
    """The sealed reconstruction of the consumed turn the custody (``judged``) names."""
    custody: ObservationCustody = judged
    observed = observation_check(sources, custody)
    return RecoveryEvidence(
        holds=observed.holds,
        decided_on={
            # the reconstructed continuation is part of what the decision rests on
            "observation_checkpoint_digest": observed.derived_checkpoint_digest,
            "observation_witness_digest": observed.witness_digest,
        },
        proof=ObservationProof.of(custody, observed),
        commit_inputs=(
            DerivedCheckpoint(
                observed.derived_checkpoint,
                observed.derived_checkpoint_digest,
                observed.witness_digest,
            )
            if observed.derived_checkpoint
            else None
        ),
    )


CANDIDATE: Final = RecoveryWorkflow(checks=RECOVERY_CHECKS, evidence=evidence)
