"""The candidate domain: read-only evaluation of held runs (no grpc, no database).

API::

    CandidateEvaluator(sources, *, clock=utc_now, qualified=is_qualified, evaluations=None)
        .invalid_read_continuity(run_id, version=1) -> Candidate
        Gathers the facts once (``gather_facts``), then runs the invalid-read workflow's pure
        checks over them (``evaluate(INVALID_READ_CONTINUITY, facts)``). Returns the candidate
        with every hold that applies, its exact digests, proof, qualification and handoff
        payload. Raises only for an unsupported version (InvalidArgument VERSION_UNSUPPORTED), an
        unknown run (NotFound RUN_NOT_FOUND, from the ledger), an unavailable dependency, a
        journal that kept changing during the read (Aborted JOURNAL_CHANGED_DURING_READ), or a
        reconstruction reason the candidate does not map (Internal
        RECONSTRUCTION_REASON_UNMAPPED).

    CandidateEvaluator(...).invalid_read_continuity_for_admission(run_id, version=1)
        -> (Candidate, Reconstruction | None)
        The candidate and, when it is eligible, the reconstruction its proof binds with the
        derived checkpoint bytes: what the admission commit stores (admission does not
        reconstruct again).

    EvaluationMemory(max_runs=2048)
        The eligible candidates operators read, by run, until the admission that follows takes
        them (ADR 0066): the evaluator remembers each eligible read with admission inputs, and an
        admission whose gathered facts match those (all but the clock) gets that candidate with
        its deadline counted again instead of evaluating again.

    gather_facts(sources, run_id, version, *, clock, qualified) -> Facts
        Every read, once: the run, its whole journal and the ledger's verification (one
        consistent head), the current policy, the run's execution requests, the checkpoint /
        response blobs the journal names, reconstruction's analysis of the consumed response and,
        when the analysis refuses nothing, the reconstruction (or their typed refusals).

    Workflow, INVALID_READ_CONTINUITY, evaluate(workflow, facts) -> Candidate
        A workflow is a tuple of checks (``checks.common`` shared by every candidate kind,
        ``checks.invalid_read`` for this one) and how it assembles its proof.

    CandidateSources
        The read-only interface the evaluator needs (see sources.py); the service implements it
        over gRPC.
"""

from __future__ import annotations

from services.candidate.domain.evaluate import CandidateEvaluator
from services.candidate.domain.evaluation_memory import EvaluationMemory
from services.candidate.domain.facts import Facts, Refusal, gather_facts, read_snapshot
from services.candidate.domain.model import (
    REQUIREMENTS,
    AnalysisAndReconstruction,
    AnalysisFinding,
    Candidate,
    ChainVerification,
    ConsumedCall,
    Digests,
    Entry,
    ExecutionRecord,
    ExecutionState,
    Hold,
    HoldReason,
    JournalHead,
    PendingReproduction,
    PolicyRecord,
    Proof,
    Qualification,
    Reconstruction,
    Requirement,
    ResponseAnalysis,
    RunRecord,
    Snapshot,
)
from services.candidate.domain.sources import CandidateSources, CombinedReconstructionSources
from services.candidate.domain.workflows import (
    INVALID_READ_CONTINUITY,
    Workflow,
    evaluate,
    source_digest,
)

__all__ = [
    "INVALID_READ_CONTINUITY",
    "REQUIREMENTS",
    "AnalysisAndReconstruction",
    "AnalysisFinding",
    "Candidate",
    "CandidateEvaluator",
    "CandidateSources",
    "ChainVerification",
    "CombinedReconstructionSources",
    "ConsumedCall",
    "Digests",
    "Entry",
    "EvaluationMemory",
    "ExecutionRecord",
    "ExecutionState",
    "Facts",
    "Hold",
    "HoldReason",
    "JournalHead",
    "PendingReproduction",
    "PolicyRecord",
    "Proof",
    "Qualification",
    "Reconstruction",
    "Refusal",
    "Requirement",
    "ResponseAnalysis",
    "RunRecord",
    "Snapshot",
    "Workflow",
    "evaluate",
    "gather_facts",
    "read_snapshot",
    "source_digest",
]
