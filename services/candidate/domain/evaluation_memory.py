"""The eligible candidates operators read, by run, until the admission that follows takes them
(ADR 0066).

An operator reads a held run's candidate and admits it with the candidate's digests; the
admission's candidate gathers the same run's facts a moment later (only the header crosses the
wire while the head has not moved, ADR 0030; reconstruction's answer is remembered by content,
ADR 0028) and evaluated them all again. The evaluation is a pure function of the facts
(``workflows.evaluate``), which read the clock only for the handoff's
``deadline_remaining_seconds``. So where the admission's facts match those an eligible candidate
was evaluated from, the admission's candidate is that one with its deadline counted again.

"Match" compares every fact but three, each fixed by one that is compared:

- the journal's entries, by the head (sequence and hash) with both verifications (the ledger's
  and this service's recomputation of the chain over the entries read, as they arrived: a
  candidate read without that recomputation is never remembered, so a valid recomputation
  ending at the same head hash means the same entries);
- the closure (derived from the entries);
- the checkpoint and consumed response bytes, by the closure's digests: each is either absent or
  exactly the bytes of its digest (``facts._intact_blob``), so only whether each is there is
  compared.

Only an eligible candidate that carries admission inputs is remembered, and an admission takes
it (the next admission of the run evaluates again): the memory holds runs read and not yet
admitted, bounded by runs, least recently used first out. Nothing here is shared across
processes; a miss only costs the evaluation it saves.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Final

from services.candidate.domain.facts import Facts
from services.candidate.domain.model import Candidate, Reconstruction
from shared.continuity.timeutil import deadline_remaining_seconds

#: A bench round reads and admits 808 runs; an operator reads far fewer before admitting.
DEFAULT_MAX_RUNS: Final = 2048
#: What one remembered candidate holds besides the derived checkpoint's bytes: the candidate
#: with its proof and handoff (about 10 KB for the tests' held run, counted object by object)
#: and its key's records (the analysis and reconstruction are shared with ADR 0028's answers).
_OVERHEAD: Final = 12 * 1024


def _key(facts: Facts) -> tuple[object, ...]:
    """Every fact an evaluation reads, but the clock and those it fixes (the module's doc)."""
    snapshot = facts.snapshot
    return (
        facts.version,
        snapshot.run,
        snapshot.head,
        snapshot.verification,
        snapshot.recomputed,
        facts.policy,
        facts.executions,
        facts.qualified,
        facts.checkpoint is None,
        facts.response is None,
        facts.analysis,
        facts.analysis_refusal,
        facts.reconstruction,
        facts.reconstruction_refusal,
    )


@dataclass(frozen=True)
class _Remembered:
    key: tuple[object, ...]
    candidate: Candidate
    inputs: Reconstruction


class EvaluationMemory:
    """Eligible candidates by run, from an operator's read to the admission that takes them;
    thread-safe (handlers run on a thread pool). ``hits`` counts admissions answered from it,
    ``misses`` admissions that evaluated."""

    def __init__(self, *, max_runs: int = DEFAULT_MAX_RUNS) -> None:
        self._max_runs = max_runs
        self._candidates: OrderedDict[str, _Remembered] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def remember(self, facts: Facts, candidate: Candidate, inputs: Reconstruction | None) -> None:
        """Keep ``candidate``, evaluated from ``facts``, for the run's admission when it is
        eligible with admission ``inputs`` and its entries' chain was recomputed as they were
        read; otherwise forget the run."""
        run_id = facts.run.run_id
        with self._lock:
            self._candidates.pop(run_id, None)
            if not candidate.eligible or inputs is None or facts.snapshot.recomputed is None:
                return
            self._candidates[run_id] = _Remembered(_key(facts), candidate, inputs)
            while len(self._candidates) > self._max_runs:
                self._candidates.popitem(last=False)

    def take(self, facts: Facts) -> tuple[Candidate, Reconstruction] | None:
        """The candidate remembered for ``facts``' run, with its deadline counted at
        ``facts.now``, when it was evaluated from matching facts (None: evaluate them). The run
        is forgotten either way."""
        with self._lock:
            found = self._candidates.pop(facts.run.run_id, None)
            if found is None or found.key != _key(facts):
                self.misses += 1
                return None
            self.hits += 1
        return _counted_at(found.candidate, facts), found.inputs

    def __len__(self) -> int:
        with self._lock:
            return len(self._candidates)

    @property
    def held_bytes(self) -> int:
        """Approximate: each candidate's derived checkpoint and a fixed overhead."""
        with self._lock:
            return sum(
                len(found.inputs.derived_checkpoint) + _OVERHEAD
                for found in self._candidates.values()
            )


def _counted_at(candidate: Candidate, facts: Facts) -> Candidate:
    """``candidate`` with the handoff's deadline counted at ``facts.now``, the one part of an
    evaluation the clock decides."""
    consumed = candidate.handoff.consumed
    remaining = deadline_remaining_seconds(facts.run.active_deadline, facts.now)
    if remaining == consumed.deadline_remaining_seconds:
        return candidate
    handoff = replace(
        candidate.handoff, consumed=replace(consumed, deadline_remaining_seconds=remaining)
    )
    return replace(candidate, handoff=handoff)
