"""Workflows: a candidate kind is its checks (in report order) and how it assembles its proof.

:func:`evaluate` runs every check of a workflow over the gathered facts, keeps the first hold of
each (reason, subject), and assembles the candidate: proof, qualification, the exact digests and
the handoff. A later candidate kind composes the common checks with its own.

A recovery candidate is a :class:`RecoveryWorkflow`: the common checks every recovery reviews
again over its own ``RecoveryFacts`` (gathered once), and the workflow's own evidence (reads of
stored documents and reconstruction, then pure holds); the recovery-workflow registry's one
admissibility check decides the rest (``recovery/``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from services.candidate.domain.checks import Check, common, invalid_read, policy_epoch
from services.candidate.domain.facts import Facts
from services.candidate.domain.handoff import build_handoff
from services.candidate.domain.journal import custody_rows
from services.candidate.domain.model import (
    Candidate,
    Digests,
    Hold,
    HoldReason,
    Proof,
    Qualification,
    RunRecord,
)
from services.candidate.domain.sources import CandidateSources
from shared.continuity.canonical import digest_of
from shared.runtime.errors import Internal

if TYPE_CHECKING:
    from services.candidate.domain.recovery.facts import RecoveryFacts
    from shared.continuity.recovery import DerivedCheckpoint


@dataclass(frozen=True)
class Workflow:
    """One candidate kind."""

    # The kind bound into the candidate digest.
    kind: str
    checks: tuple[Check, ...]
    # Whether the facts carry a complete proof (an eligible candidate must).
    proven: Callable[[Facts], bool]
    proof: Callable[[Facts], Proof]
    # A call the continuation settles, so the handoff does not list it as unresolved.
    settled_call: Callable[[Facts], str]


INVALID_READ_CONTINUITY: Final = Workflow(
    kind="forge.continuity.v1.InvalidReadContinuityCandidate",
    checks=(
        common.chain,
        common.held_state,
        common.origin,
        policy_epoch.adopted_epoch,
        common.closure,
        common.custody_after_consume,
        common.unknown_outcomes,
        invalid_read.error_message_only,
        common.policy_enabled,
        invalid_read.observation_policy,
        common.profile_qualified,
        common.time_budget,
        common.outstanding_claims,
        invalid_read.analysis,
        invalid_read.reconstruction,
    ),
    proven=invalid_read.proven,
    proof=invalid_read.proof,
    settled_call=invalid_read.rejected_evidence_call,
)


@dataclass(frozen=True)
class RecoveryEvidence:
    """What a recovery workflow's own evidence adds to its candidate."""

    holds: tuple[Hold, ...] = ()
    #: What the decision also rests on; joins the candidate digest.
    decided_on: Mapping[str, object] = field(default_factory=dict)
    #: The proof the candidate shows (the read-only observation's reconstruction).
    proof: Any = None
    #: What the commit stores that this evaluation computed (one pass of proof).
    commit_inputs: DerivedCheckpoint | None = None


def no_evidence(sources: CandidateSources, facts: RecoveryFacts, judged: Any) -> RecoveryEvidence:
    """A workflow whose evidence is the journal alone adds nothing."""
    return RecoveryEvidence()


@dataclass(frozen=True)
class RecoveryWorkflow:
    """One recovery candidate kind (see the module's docstring)."""

    #: The checks every recovery reviews again, in report order (``recovery/facts.py``).
    checks: tuple[Callable[[RecoveryFacts], list[Hold]], ...]
    #: The workflow's own evidence, given the registry descriptor's reading of the journal.
    evidence: Callable[[CandidateSources, RecoveryFacts, Any], RecoveryEvidence] = no_evidence


def holds_of(workflow: Workflow, facts: Facts) -> tuple[Hold, ...]:
    """Every hold the workflow's checks find, in check order, each (reason, subject) once."""
    # One loop, not a generator into a filter: a held long journal has a hold per entry.
    seen: set[tuple[HoldReason, str]] = set()
    kept: list[Hold] = []
    for check in workflow.checks:
        for found in check(facts):
            key = (found.reason, found.subject)
            if key not in seen:
                seen.add(key)
                kept.append(found)
    return tuple(kept)


def evaluate(workflow: Workflow, facts: Facts) -> Candidate:
    """The workflow's candidate from the gathered facts."""
    run, policy, head = facts.run, facts.policy, facts.head
    holds = holds_of(workflow, facts)
    proven = workflow.proven(facts)
    if not holds and not proven:
        raise Internal("CANDIDATE_PROOF_MISSING", "no hold applies but no proof was built")
    version = facts.version if proven else 0
    eligible = not holds
    proof = workflow.proof(facts)
    qualification = Qualification(run.source_profile, facts.qualified)
    source = source_digest(run)
    custody = digest_of(custody_rows(facts.entries))
    candidate_digest = digest_of(
        {
            "kind": workflow.kind,
            "run_id": run.run_id,
            "attempt_id": run.attempt_id,
            "version": version,
            "eligible": eligible,
            "run_digest": run.run_digest,
            "journal_digest": head.hash,
            "policy_digest": policy.digest,
            "policy_revision": policy.revision,
            "source_digest": source,
            "custody_digest": custody,
            "proof": proof.canonical(),
            "qualification": {
                "source_profile": qualification.source_profile,
                "qualified": qualification.qualified,
            },
            "holds": sorted([_REASON_VALUES[h.reason], h.subject] for h in holds),
        }
    )
    return Candidate(
        run_id=run.run_id,
        attempt_id=run.attempt_id,
        eligible=eligible,
        version=version,
        digests=Digests(candidate_digest, run.run_digest, head.hash, policy.digest),
        proof=proof,
        qualification=qualification,
        policy_revision=policy.revision,
        source_digest=source,
        custody_digest=custody,
        holds=holds,
        handoff=build_handoff(
            run=run,
            entries=facts.entries,
            closure=facts.closure,
            holds=holds,
            eligible=eligible,
            rejected_evidence_call=workflow.settled_call(facts),
            now=facts.now,
        ),
        journal_head=head,
    )


# Each reason's contract value, looked up once per hold (``Enum.value`` is a Python property).
_REASON_VALUES: Final = {reason: reason.value for reason in HoldReason}


def source_digest(run: RunRecord) -> str:
    """digest_of({source_revision, configuration_digest, source_profile}) of the run record."""
    return digest_of(
        {
            "source_revision": run.source_revision,
            "configuration_digest": run.configuration_digest,
            "source_profile": run.source_profile,
        }
    )
