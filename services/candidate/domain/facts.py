"""Gathering the facts of a candidate, once: every read from :class:`CandidateSources` happens
here, before any check runs, so the checks are pure functions of one frozen :class:`Facts`.

The run, its whole journal and the ledger's verification are read at one consistent head: as one
database snapshot when the sources offer it (:class:`SnapshotSources`, which also carries the
policy and execution requests), otherwise read again while the head moves (ABORTED
JOURNAL_CHANGED_DURING_READ when it never settles). Then the current policy and the run's
execution requests (unless the snapshot had them), the checkpoint and consumed-response blobs the
journal names (kept only when intact; the snapshot's copy when it carried them intact, read apart
otherwise), reconstruction's analysis of the consumed response and, when the analysis refuses
nothing for the version, the reconstruction (in one call when the sources offer it,
:class:`CombinedReconstructionSources`). A refusal of either is a fact too
(:class:`Refusal`); any other error propagates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from services.candidate.domain.journal import RUN_HELD, Closure
from services.candidate.domain.model import (
    ConsumedCall,
    Entry,
    ExecutionRecord,
    PolicyRecord,
    ReadFromSnapshot,
    Reconstruction,
    ResponseAnalysis,
    Snapshot,
)
from services.candidate.domain.sources import (
    CandidateSources,
    offers_combined_reconstruction,
    offers_snapshot,
)
from shared.continuity.canonical import intact_blob
from shared.continuity.journal_closure import closure_of
from shared.continuity.qualification import is_qualified
from shared.continuity.timeutil import utc_now
from shared.runtime.errors import (
    Aborted,
    Cancelled,
    DeadlineExceeded,
    DomainError,
    FailedPrecondition,
    InvalidArgument,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)

MAX_READ_ATTEMPTS: Final = 3


def read_snapshot(
    sources: CandidateSources, run_id: str, *, closure_blobs: bool = False
) -> Snapshot:
    """Read run, journal and verification until all three describe the same head (one
    snapshot read when the source offers it, with the closure's blobs when ``closure_blobs``)."""
    for _ in range(MAX_READ_ATTEMPTS):
        if offers_snapshot(sources):
            snapshot = sources.snapshot(run_id, closure_blobs=closure_blobs)
            verification = snapshot.verification
            if not verification.valid or verification.head == snapshot.head:
                return snapshot
            continue
        run, head = sources.run(run_id)
        entries, read_head = sources.journal(run_id)
        verification = sources.verify(run_id)
        if read_head == head and (not verification.valid or verification.head == head):
            return Snapshot(run, head, tuple(entries), verification)
    raise Aborted(
        "JOURNAL_CHANGED_DURING_READ",
        f"the journal of {run_id} kept changing while the candidate was read; read it again",
        metadata={"run_id": run_id},
    )


#: Errors that are no answer about the bytes: the call did not complete (retry it), or this
#: service may not make it (fix the deployment). They propagate; everything else is a refusal.
NOT_REFUSALS: Final = (
    Unavailable,
    DeadlineExceeded,
    Cancelled,
    Aborted,
    Unauthenticated,
    PermissionDenied,
)


def is_refusal(error: DomainError) -> bool:
    """Whether ``error``, raised by a reconstruction call, is its refusal of the bytes."""
    return not isinstance(error, NOT_REFUSALS)


@dataclass(frozen=True)
class Refusal:
    """A refusal of reconstruction (``checks.reconstruction_reasons.is_refusal``)."""

    reason: str
    message: str
    # What the refusal names: its ``field`` or ``element`` metadata ("" when it names neither).
    names: str
    # A typed refusal (FAILED_PRECONDITION or INVALID_ARGUMENT), whose reason maps to its hold.
    typed: bool = True

    @classmethod
    def of(cls, error: DomainError) -> Refusal:
        names = error.metadata.get("field") or error.metadata.get("element") or ""
        typed = isinstance(error, FailedPrecondition | InvalidArgument)
        return cls(error.reason, error.message, names, typed)


@dataclass(frozen=True)
class Facts(ReadFromSnapshot):
    """Everything a candidate is computed from, read once."""

    version: int
    snapshot: Snapshot
    policy: PolicyRecord
    executions: tuple[ExecutionRecord, ...]
    qualified: bool
    now: datetime
    # The journal's last request / consume / checkpoint closure (derived from the entries).
    closure: Closure
    # The blobs the closure names, when stored intact (None: absent, altered or never named).
    checkpoint: bytes | None
    response: bytes | None
    # Reconstruction's analysis of the consumed response, or its refusal (both None when the
    # blobs were not there to analyze).
    analysis: ResponseAnalysis | None
    analysis_refusal: Refusal | None
    # The reconstruction, or its refusal (both None when it was not attempted).
    reconstruction: Reconstruction | None
    reconstruction_refusal: Refusal | None

    @property
    def final_held(self) -> Entry | None:
        """The last journal entry when it is ``run_held``."""
        last = self.entries[-1] if self.entries else None
        return last if last is not None and last.kind == RUN_HELD else None

    @property
    def calls(self) -> tuple[ConsumedCall, ...] | None:
        """The consumed response's tool calls as the pinned SDK parsed them (reconstruction's
        analysis); None when there is no analysis. The candidate never parses the response
        itself; without an analysis the candidate is always held already (a missing blob or
        consume, or the analysis refusal), so calls that cannot be known only lose detail."""
        return self.analysis.tool_calls if self.analysis is not None else None


def gather_facts(
    sources: CandidateSources,
    run_id: str,
    version: int,
    *,
    clock: Callable[[], datetime] = utc_now,
    qualified: Callable[[str], bool] = is_qualified,
) -> Facts:
    """Read everything the candidate of ``run_id`` under ``version`` is computed from."""
    snapshot = read_snapshot(sources, run_id, closure_blobs=True)
    policy = snapshot.policy if snapshot.policy is not None else sources.policy()
    executions = (
        snapshot.executions
        if snapshot.executions is not None
        else tuple(sources.execution_requests(run_id))
    )
    now = clock()
    is_profile_qualified = qualified(snapshot.run.source_profile)
    closure = closure_of(snapshot.entries)
    checkpoint = response = None
    if closure.request is not None:
        checkpoint = _intact_blob(sources, snapshot.blobs, closure.checkpoint_digest)
        if closure.consume is not None:
            response = _intact_blob(sources, snapshot.blobs, closure.response_digest)
    analyzed = (
        _analyze_and_reconstruct(sources, checkpoint, response, version, closure.consumed_at)
        if checkpoint is not None and response is not None
        else _Analyzed()
    )
    return Facts(
        version=version,
        snapshot=snapshot,
        policy=policy,
        executions=executions,
        qualified=is_profile_qualified,
        now=now,
        closure=closure,
        checkpoint=checkpoint,
        response=response,
        analysis=analyzed.analysis,
        analysis_refusal=analyzed.analysis_refusal,
        reconstruction=analyzed.reconstruction,
        reconstruction_refusal=analyzed.reconstruction_refusal,
    )


@dataclass(frozen=True)
class _Analyzed:
    """The analysis and reconstruction facts (all None: the blobs were not there to analyze)."""

    analysis: ResponseAnalysis | None = None
    analysis_refusal: Refusal | None = None
    reconstruction: Reconstruction | None = None
    reconstruction_refusal: Refusal | None = None


def _analyze_and_reconstruct(
    sources: CandidateSources, checkpoint: bytes, response: bytes, version: int, consumed_at: str
) -> _Analyzed:
    """Reconstruction's analysis and, when it refuses nothing for the version, the
    reconstruction at the native consumption time (none without one)."""
    combined = None
    try:
        if offers_combined_reconstruction(sources):
            combined = sources.analyze_and_reconstruct(checkpoint, response, version, consumed_at)
            analysis = combined.analysis
        else:
            analysis = sources.analyze(checkpoint, response)
    except DomainError as error:
        if not is_refusal(error):
            raise
        return _Analyzed(analysis_refusal=Refusal.of(error))
    # Reconstruct only what the analysis refuses nothing of, at its native consumption time. The
    # decision stays here: a combined answer is used only for it (an outcome the candidate would
    # not have asked for is ignored, a missing one is asked for separately).
    if analysis.holds(version) or not consumed_at:
        return _Analyzed(analysis)
    if combined is not None and combined.reconstruction is not None:
        return _Analyzed(analysis, reconstruction=combined.reconstruction)
    if combined is not None and combined.reconstruction_refusal is not None:
        return _Analyzed(
            analysis, reconstruction_refusal=Refusal.of(combined.reconstruction_refusal)
        )
    try:
        reconstruction = sources.reconstruct(checkpoint, response, version, consumed_at)
    except DomainError as error:
        if not is_refusal(error):
            raise
        return _Analyzed(analysis, reconstruction_refusal=Refusal.of(error))
    return _Analyzed(analysis, reconstruction=reconstruction)


def _intact_blob(
    sources: CandidateSources, prefetched: Mapping[str, bytes], digest: str
) -> bytes | None:
    """The blob named ``digest`` when its bytes hash to it: the snapshot's copy when intact,
    otherwise (not sent, or altered) read apart exactly as without a snapshot."""
    content = intact_blob(prefetched.get, digest)
    return content if content is not None else intact_blob(sources.blob, digest)
