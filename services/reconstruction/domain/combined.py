"""``analyze_and_reconstruct_invalid_read``: the analysis and, only when it allows it, the
reconstruction of the same bytes in one step, as a caller of the two separate entry points would
ask for them (the candidate: reconstruct only with no analysis hold for the version and a
consumption time to bind the derived messages to).

A refusal of the analysis propagates as it does from ``analyze_consumed_response``. A refusal of
the reconstruction (FAILED_PRECONDITION / INVALID_ARGUMENT) is part of the result, so the caller
still gets the analysis; any other error propagates, as it does from ``reconstruct_invalid_read``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from services.reconstruction.domain.analysis import ResponseAnalysis
from services.reconstruction.domain.reconstruct import (
    ReconstructionResult,
    analyze_consumed_response,
    reconstruct_invalid_read,
)
from shared.runtime.errors import FailedPrecondition, InvalidArgument

Analyze = Callable[[bytes, bytes], ResponseAnalysis]
Reconstruct = Callable[[bytes, bytes, int, str], ReconstructionResult]


@dataclass(frozen=True)
class AnalysisAndReconstruction:
    """The analysis, and the reconstruction or its refusal (both None when not attempted)."""

    analysis: ResponseAnalysis
    reconstruction: ReconstructionResult | None = None
    refusal: FailedPrecondition | InvalidArgument | None = None


def wants_reconstruction(analysis: ResponseAnalysis, version: int, consumed_at: str) -> bool:
    """Reconstruct only what the analysis refuses nothing of, at a known consumption time."""
    return not analysis.holds(version) and bool(consumed_at)


def analyze_and_reconstruct_invalid_read(
    checkpoint: bytes,
    raw_response: bytes,
    version: int,
    consumed_at: str,
    *,
    analyze: Analyze = analyze_consumed_response,
    reconstruct: Reconstruct = reconstruct_invalid_read,
) -> AnalysisAndReconstruction:
    """``analyze`` then, when :func:`wants_reconstruction`, ``reconstruct`` (both injectable so the
    service answers each part from its content-addressed cache, as the separate calls do)."""
    analysis = analyze(checkpoint, raw_response)
    if not wants_reconstruction(analysis, version, consumed_at):
        return AnalysisAndReconstruction(analysis)
    try:
        result = reconstruct(checkpoint, raw_response, version, consumed_at)
    except (FailedPrecondition, InvalidArgument) as refusal:
        return AnalysisAndReconstruction(analysis, refusal=refusal)
    return AnalysisAndReconstruction(analysis, reconstruction=result)
