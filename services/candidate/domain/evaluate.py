"""Evaluating the invalid-read continuity candidate of a held run.

Read-only: the facts are gathered once from :class:`CandidateSources` (``facts.gather_facts``),
then the workflow's pure checks run over them (``workflows.evaluate``); nothing is written and no
claim is created. Every condition is evaluated and every hold that applies is reported together.
Only an unknown run (or an unavailable dependency) is an error; everything else is a candidate,
eligible or held.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from services.candidate.domain.evaluation_memory import EvaluationMemory
from services.candidate.domain.facts import Facts, gather_facts
from services.candidate.domain.model import Candidate, Reconstruction
from services.candidate.domain.sources import CandidateSources
from services.candidate.domain.workflows import INVALID_READ_CONTINUITY, evaluate
from shared.continuity.qualification import is_qualified
from shared.continuity.timeutil import utc_now
from shared.contract.terms import DEFAULT_VERSION, SUPPORTED_VERSIONS
from shared.runtime.errors import InvalidArgument


class CandidateEvaluator:
    """Computes candidates from read-only sources."""

    def __init__(
        self,
        sources: CandidateSources,
        *,
        clock: Callable[[], datetime] = utc_now,
        qualified: Callable[[str], bool] = is_qualified,
        evaluations: EvaluationMemory | None = None,
    ) -> None:
        self._sources = sources
        self._clock = clock
        self._qualified = qualified
        self.evaluations = evaluations if evaluations is not None else EvaluationMemory()

    def invalid_read_continuity(self, run_id: str, version: int = DEFAULT_VERSION) -> Candidate:
        """The candidate of ``run_id`` under continuity ``version``; an eligible one is
        remembered for the admission that follows (``EvaluationMemory``, ADR 0066)."""
        facts = self._facts(run_id, version)
        candidate, inputs = evaluated(facts)
        self.evaluations.remember(facts, candidate, inputs)
        return candidate

    def invalid_read_continuity_for_admission(
        self, run_id: str, version: int = DEFAULT_VERSION
    ) -> tuple[Candidate, Reconstruction | None]:
        """The candidate and, when it is eligible, the reconstruction its proof binds with the
        derived checkpoint bytes: what the admission commit stores, so that admission commits
        this one reconstruction instead of reading and reconstructing the same bytes again.
        The facts are always gathered again; where they match those an operator's read of the
        run was evaluated from, its candidate stands for a second evaluation (ADR 0066)."""
        facts = self._facts(run_id, version)
        remembered = self.evaluations.take(facts)
        return remembered if remembered is not None else evaluated(facts)

    def _facts(self, run_id: str, version: int) -> Facts:
        if version not in SUPPORTED_VERSIONS:
            raise InvalidArgument(
                "VERSION_UNSUPPORTED",
                f"continuity version {version} is not {' or '.join(map(str, SUPPORTED_VERSIONS))}",
                metadata={"field": "version"},
            )
        return gather_facts(
            self._sources, run_id, version, clock=self._clock, qualified=self._qualified
        )


def evaluated(facts: Facts) -> tuple[Candidate, Reconstruction | None]:
    """The invalid-read candidate of ``facts`` and, when it is eligible, its admission inputs."""
    candidate = evaluate(INVALID_READ_CONTINUITY, facts)
    return candidate, admission_inputs(facts) if candidate.eligible else None


def admission_inputs(facts: Facts) -> Reconstruction | None:
    """The reconstruction the facts hold, with its derived checkpoint bytes (None without)."""
    reconstruction = facts.reconstruction
    if reconstruction is None or not reconstruction.derived_checkpoint:
        return None
    return reconstruction
