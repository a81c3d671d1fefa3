"""The candidate domain: read-only evaluation of held runs (no grpc, no database).

API::

    CandidateEvaluator(sources, *, clock=utc_now, qualified=is_qualified)
        .invalid_read_continuity(run_id, version=1) -> Candidate
        Reads the run, its whole journal and the ledger's verification (one consistent head),
        the current policy, the run's execution requests and the checkpoint / response blobs the
        journal names; asks reconstruction to analyze the consumed response and, when the
        analysis refuses nothing, to derive the checkpoint. Returns the candidate with every hold
        that applies, its exact digests, proof, qualification and handoff payload. Raises only
        for an unknown run (NotFound RUN_NOT_FOUND, from the ledger), an unavailable dependency,
        or a journal that kept changing during the read (Aborted JOURNAL_CHANGED_DURING_READ).

    CandidateSources
        The read-only interface the evaluator needs (see sources.py); the service implements it
        over gRPC.
"""

from __future__ import annotations

from .evaluate import CandidateEvaluator, read_snapshot, source_digest
from .model import (
    REQUIREMENTS,
    AnalysisFinding,
    Candidate,
    ChainVerification,
    ConsumedCall,
    ConsumedResources,
    Digests,
    Entry,
    ExecutionRecord,
    ExecutionState,
    Handoff,
    Hold,
    HoldReason,
    JournalHead,
    KnownEffect,
    PermittedAction,
    PolicyRecord,
    Proof,
    Qualification,
    Reconstruction,
    RemainingObligation,
    Requirement,
    ResponseAnalysis,
    RunRecord,
    UnresolvedAlternative,
)
from .sources import CandidateSources

__all__ = [
    "REQUIREMENTS",
    "AnalysisFinding",
    "Candidate",
    "CandidateEvaluator",
    "CandidateSources",
    "ChainVerification",
    "ConsumedCall",
    "ConsumedResources",
    "Digests",
    "Entry",
    "ExecutionRecord",
    "ExecutionState",
    "Handoff",
    "Hold",
    "HoldReason",
    "JournalHead",
    "KnownEffect",
    "PermittedAction",
    "PolicyRecord",
    "Proof",
    "Qualification",
    "Reconstruction",
    "RemainingObligation",
    "Requirement",
    "ResponseAnalysis",
    "RunRecord",
    "UnresolvedAlternative",
    "read_snapshot",
    "source_digest",
]
