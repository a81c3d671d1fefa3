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

from shared.contract import DEFAULT_VERSION, SUPPORTED_VERSIONS
from shared.errors import InvalidArgument
from shared.qualification import is_qualified
from shared.timeutil import utc_now

from .facts import gather_facts
from .model import Candidate
from .sources import CandidateSources
from .workflows import INVALID_READ_CONTINUITY, evaluate


class CandidateEvaluator:
    """Computes candidates from read-only sources."""

    def __init__(
        self,
        sources: CandidateSources,
        *,
        clock: Callable[[], datetime] = utc_now,
        qualified: Callable[[str], bool] = is_qualified,
    ) -> None:
        self._sources = sources
        self._clock = clock
        self._qualified = qualified

    def invalid_read_continuity(self, run_id: str, version: int = DEFAULT_VERSION) -> Candidate:
        """The candidate of ``run_id`` under continuity ``version``."""
        if version not in SUPPORTED_VERSIONS:
            raise InvalidArgument(
                "VERSION_UNSUPPORTED",
                f"continuity version {version} is not {' or '.join(map(str, SUPPORTED_VERSIONS))}",
                metadata={"field": "version"},
            )
        facts = gather_facts(
            self._sources, run_id, version, clock=self._clock, qualified=self._qualified
        )
        return evaluate(INVALID_READ_CONTINUITY, facts)
