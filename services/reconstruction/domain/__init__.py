"""Pure reconstruction library (no grpc, no database, no network).

API::

    reconstruct_invalid_read(checkpoint: bytes, raw_response: bytes, version: int,
                             consumed_at: str) -> ReconstructionResult
        Verify the historical checkpoint (canonical bytes, sealed state digest, registered
        runtime and validator identities), project it 2.58.0 → 2.55.0 with a witness, parse the
        consumed response once through the pinned SDK behind a sealed transport, check
        eligibility, migrate the tool contract against the installed worker (captured through a
        second sealed transport) and return the derived checkpoint: ``derived_checkpoint`` bytes
        (canonical JSON), ``derived_checkpoint_digest``, ``witness`` (+ ``witness_json``,
        ``witness_digest``), ``captured_contract`` (+ json) and ``accounting`` (+ json).
        Version 1 appends ``{"status":"invalid_query"}`` for the one rejected read_run_evidence
        call; version 2 also appends the unavailable-observation result for each list_files
        sibling. Same inputs → same bytes, in any process.
        Raises ``shared.runtime.errors.InvalidArgument`` (VERSION_UNSUPPORTED, CONSUMED_AT_INVALID,
        CHECKPOINT_MALFORMED) or ``FailedPrecondition`` with a typed reason whose metadata names
        the ``field`` (SDK projection, checkpoint identity) or ``element`` (contract, response).

    analyze_consumed_response(checkpoint: bytes, raw_response: bytes) -> ResponseAnalysis
        Read-only: the tool calls, the single read_run_evidence call id and query,
        accepted_by_advertised_schema, rejected_by_pinned_validator, validator_error, runtime
        and validator identities, sibling calls, unsupported content, and ``holds(version)``.

    analyze_and_reconstruct_invalid_read(checkpoint: bytes, raw_response: bytes, version: int,
                                         consumed_at: str) -> AnalysisAndReconstruction
        The analysis and, only when it holds nothing for ``version`` and ``consumed_at`` is set,
        the reconstruction; a reconstruction refusal (FailedPrecondition / InvalidArgument) is
        returned as ``refusal``, an analysis refusal raises as above.
        (``services.reconstruction.domain.combined``.)

    reproduce_pending_request(derived_checkpoint: bytes) -> PendingRequest
        Verify the derived checkpoint (canonical bytes, format, sealed state digest, target
        runtime), resume it through the installed ``execute_agentic`` and the pinned SDK behind a
        sealed transport that records the first outbound request and refuses it (no response,
        no callback, no network), and return the exact wire body (``wire``, ``wire_digest``,
        ``wire_length``, ``method``, ``url``) and its canonical ``parts`` (history, model
        settings, tool definitions, other request parameters, usage, limits) with their digests
        and one ``reproduction_digest``. Same inputs → same bytes. Raises FailedPrecondition
        PENDING_REQUEST_NOT_SENT / PENDING_STATE_DIVERGED (``element``) or a checkpoint reason.

    reconstruct_readonly_observation(derived_checkpoint: bytes, raw_response: bytes,
                                     consumed_at: str, retained_results) -> ObservationResult
        A consumed continuation turn whose read_run_evidence result was not retained: the
        consumed response is parsed once through the pinned SDK behind the sealed transport, the
        stored history is kept as stored, and the exact retained list_files result and the fixed
        unavailable observation are appended; canonical JSON (types preserved) of history,
        usage, limits, settings and contract is validated. Raises FailedPrecondition
        OBSERVATION_RECONSTRUCTION_DIVERGED (``element``), a finding reason or a checkpoint
        reason. (``services.reconstruction.domain.observation``.)

Async forms: ``areconstruct_invalid_read``, ``aanalyze_consumed_response``,
``areproduce_pending_request``.

``ANALYSIS_REASONS`` / ``REFUSAL_REASONS``: every finding reason the analysis reports and every
refusal reason (FAILED_PRECONDITION / INVALID_ARGUMENT) the service raises; callers that map
reasons must cover both exactly.
The formats are documented in docs/formats.md.
"""

from __future__ import annotations

from services.reconstruction.domain.analysis import Hold, ResponseAnalysis, ToolCallView
from services.reconstruction.domain.combined import (
    AnalysisAndReconstruction,
    analyze_and_reconstruct_invalid_read,
)
from services.reconstruction.domain.reasons import ANALYSIS_REASONS, REFUSAL_REASONS
from services.reconstruction.domain.reconstruct import (
    OBSERVATION_UNAVAILABLE,
    ReconstructionResult,
    aanalyze_consumed_response,
    analyze_consumed_response,
    areconstruct_invalid_read,
    reconstruct_invalid_read,
)
from shared.agent.pending import (
    PendingRequest,
    areproduce_pending_request,
    reproduce_pending_request,
)

__all__ = [
    "ANALYSIS_REASONS",
    "OBSERVATION_UNAVAILABLE",
    "REFUSAL_REASONS",
    "AnalysisAndReconstruction",
    "Hold",
    "PendingRequest",
    "ReconstructionResult",
    "ResponseAnalysis",
    "ToolCallView",
    "aanalyze_consumed_response",
    "analyze_and_reconstruct_invalid_read",
    "analyze_consumed_response",
    "areconstruct_invalid_read",
    "areproduce_pending_request",
    "reconstruct_invalid_read",
    "reproduce_pending_request",
]
