"""What the candidate reads, as an interface: the ledger (run, journal, policy, execution
requests, blobs) and reconstruction (analysis, derived checkpoint, reproduced pending request).
Every method is a read.

Implementations raise ``shared.runtime.errors.DomainError`` subclasses for refusals, so the domain
never
sees a transport type: a missing run is ``NotFound`` (RUN_NOT_FOUND); a refused analysis or
reconstruction is ``FailedPrecondition`` / ``InvalidArgument`` with the typed reason and the
``field`` / ``element`` metadata naming what was refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, TypeGuard, runtime_checkable

from services.candidate.domain.model import (
    AnalysisAndReconstruction,
    ChainVerification,
    Entry,
    ExecutionRecord,
    JournalHead,
    PendingReproduction,
    PolicyRecord,
    Reconstruction,
    ResponseAnalysis,
    RunRecord,
    Snapshot,
)


class CandidateSources(Protocol):
    """Read-only access to everything a candidate is computed from."""

    def run(self, run_id: str) -> tuple[RunRecord, JournalHead]:
        """The run and its current journal head."""
        ...

    def journal(self, run_id: str) -> tuple[Sequence[Entry], JournalHead]:
        """Every entry of the run's journal in sequence order, and the head the read ended at."""
        ...

    def verify(self, run_id: str) -> ChainVerification:
        """The ledger's recomputation of the whole chain."""
        ...

    def policy(self) -> PolicyRecord:
        """The current policy revision."""
        ...

    def execution_requests(self, run_id: str) -> Sequence[ExecutionRecord]:
        """The run's execution requests (at least every queued or claimed one)."""
        ...

    def blob(self, digest: str) -> bytes | None:
        """The stored bytes, or None when no blob has that digest."""
        ...

    def analyze(self, checkpoint: bytes, raw_response: bytes) -> ResponseAnalysis:
        """Reconstruction's read-only analysis of the consumed response."""
        ...

    def reconstruct(
        self, checkpoint: bytes, raw_response: bytes, version: int, consumed_at: str
    ) -> Reconstruction:
        """The derived checkpoint and witness digests for ``version``."""
        ...

    def reconstruct_observation(
        self,
        derived_checkpoint: bytes,
        raw_response: bytes,
        consumed_at: str,
        retained_results: Mapping[str, str],
    ) -> Reconstruction:
        """Reconstruction's sealed continuation of a consumed turn whose evidence observation was
        not retained (``retained_results``: call id → exact retained result JSON)."""
        ...

    def reproduce_pending(self, derived_checkpoint: bytes) -> PendingReproduction:
        """Reconstruction's sealed reproduction of the first provider request the derived
        checkpoint continues with (no response supplied, no callback, no network)."""
        ...


@runtime_checkable
class SnapshotSources(CandidateSources, Protocol):
    """Sources that can also read the run, head, whole journal with the ledger's verification,
    the policy and the execution requests as one consistent snapshot (one read instead of five,
    and no re-read loop)."""

    def snapshot(self, run_id: str, *, closure_blobs: bool = False) -> Snapshot:
        """Everything of :class:`Snapshot`, policy and execution requests included, read at one
        database snapshot; with ``closure_blobs``, also the stored blobs the journal's closure
        names (``shared.continuity.journal_closure``), which the reader still checks by digest."""
        ...


@runtime_checkable
class CombinedReconstructionSources(CandidateSources, Protocol):
    """Sources that can also ask reconstruction for the analysis and the reconstruction in one
    call (one hop instead of two, the same bytes sent once)."""

    def analyze_and_reconstruct(
        self, checkpoint: bytes, raw_response: bytes, version: int, consumed_at: str
    ) -> AnalysisAndReconstruction:
        """:meth:`analyze` and, only when the analysis holds nothing for ``version`` and
        ``consumed_at`` is set, :meth:`reconstruct`. A refusal of the analysis raises as from
        :meth:`analyze`; a refusal of the reconstruction is ``reconstruction_refusal``."""
        ...


# Whether a sources class offers each optional protocol, by class: isinstance against a
# runtime-checkable protocol looks up every member of the protocol on each call (about 6 % of
# the candidate's CPU under admission load; docs/performance-history.md, round 4). Sources implement
# their methods on the class, so the answer is the class's.
_OFFERED: dict[tuple[type, type], bool] = {}


def _offers(sources: CandidateSources, protocol: type) -> bool:
    key = (type(sources), protocol)
    offered = _OFFERED.get(key)
    if offered is None:
        offered = _OFFERED[key] = isinstance(sources, protocol)
    return offered


def offers_snapshot(sources: CandidateSources) -> TypeGuard[SnapshotSources]:
    """Whether ``sources`` reads the whole snapshot in one read (:class:`SnapshotSources`)."""
    return _offers(sources, SnapshotSources)


def offers_combined_reconstruction(
    sources: CandidateSources,
) -> TypeGuard[CombinedReconstructionSources]:
    """Whether ``sources`` analyzes and reconstructs in one call
    (:class:`CombinedReconstructionSources`)."""
    return _offers(sources, CombinedReconstructionSources)
