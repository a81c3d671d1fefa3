"""gRPC servicer: protobuf ↔ domain translation only.

Domain errors propagate unchanged; the server bootstrap maps them to rich statuses.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial
from typing import Any, TypeVar

from prometheus_client.core import Metric

from forge.continuity.v1 import reconstruction_pb2, reconstruction_pb2_grpc
from services.reconstruction.domain import (
    Hold,
    PendingRequest,
    ReconstructionResult,
    ResponseAnalysis,
    analyze_and_reconstruct_invalid_read,
    analyze_consumed_response,
    reconstruct_invalid_read,
    reproduce_pending_request,
)
from services.reconstruction.domain.observation import reconstruct_readonly_observation
from services.reconstruction.isolation import IsolatedRunner, Runner
from shared.continuity.canonical import CanonicalJsonError, canonical_text, parse_json
from shared.contract.method_facts import service_binding
from shared.contract.terms import VERSION_BY_RECONSTRUCTION_ENUM
from shared.runtime.content_cache import ContentCache, content_key
from shared.runtime.errors import (
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    field_required,
)
from shared.runtime.limits import reconstruction_bounds
from shared.runtime.metrics import cache_families, counter_family, export_at_scrape, gauge_family
from shared.runtime.server import ServiceBinding

T = TypeVar("T")


_SHARED: list[IsolatedRunner] = []
_SHARED_LOCK = threading.Lock()


def shared_runner() -> IsolatedRunner:
    """The process's worker processes (FORGE_RECONSTRUCTION_WORKERS and _SECONDS), started at
    first use; every servicer of the process that is given no runner shares them."""
    with _SHARED_LOCK:
        if not _SHARED:
            bounds = reconstruction_bounds()
            _SHARED.append(IsolatedRunner(bounds.workers, bounds.max_seconds))
        return _SHARED[0]


def _require(request: Any, *fields: str) -> None:
    """INVALID_ARGUMENT FIELD_REQUIRED naming the first of ``fields`` left empty."""
    for field in fields:
        if not getattr(request, field):
            raise field_required(field)


def _version(value: int) -> int:
    version = VERSION_BY_RECONSTRUCTION_ENUM.get(value)
    if version is None:
        raise InvalidArgument(
            "VERSION_UNSUPPORTED",
            "version must be RECONSTRUCTION_VERSION_V1 or _V2",
            metadata={"field": "version"},
            field_violations=[FieldViolation("version", "unspecified or unknown")],
        )
    return version


def _holds(found: tuple[Hold, ...]) -> list[reconstruction_pb2.AnalysisHold]:
    return [
        reconstruction_pb2.AnalysisHold(
            reason=hold.reason, element=hold.element, message=hold.message
        )
        for hold in found
    ]


def _analysis_to_proto(
    analysis: ResponseAnalysis,
) -> reconstruction_pb2.AnalyzeConsumedResponseResponse:
    return reconstruction_pb2.AnalyzeConsumedResponseResponse(
        tool_calls=[
            reconstruction_pb2.ConsumedToolCall(
                call_id=call.tool_call_id,
                tool_name=call.tool_name,
                args_digest=call.args_digest,
                grant=call.grant or "",
            )
            for call in analysis.tool_calls
        ],
        evidence_call_id=analysis.evidence_call_id or "",
        evidence_query_json=(
            canonical_text(analysis.evidence_query) if analysis.evidence_query is not None else ""
        ),
        accepted_by_advertised_schema=analysis.accepted_by_advertised_schema,
        rejected_by_pinned_validator=analysis.rejected_by_pinned_validator,
        validator_error=analysis.validator_error or "",
        runtime_identity_json=canonical_text(dict(analysis.runtime_identity)),
        validator_identity=analysis.validator_identity.get("source_hash", ""),
        common_holds=_holds(analysis.holds_common),
        v1_holds=_holds(analysis.holds_v1),
        v2_holds=_holds(analysis.holds_v2),
    )


def _reconstruction_to_proto(
    result: ReconstructionResult,
) -> reconstruction_pb2.ReconstructInvalidReadResponse:
    return reconstruction_pb2.ReconstructInvalidReadResponse(
        derived_checkpoint=result.derived_checkpoint,
        derived_checkpoint_digest=result.derived_checkpoint_digest,
        witness_json=result.witness_json,
        witness_digest=result.witness_digest,
        captured_contract_json=result.captured_contract_json,
        accounting_json=result.accounting_json,
    )


def _refusal_to_proto(
    refusal: FailedPrecondition | InvalidArgument,
) -> reconstruction_pb2.ReconstructionRefusal:
    return reconstruction_pb2.ReconstructionRefusal(
        code=(
            reconstruction_pb2.RECONSTRUCTION_REFUSAL_CODE_INVALID_ARGUMENT
            if isinstance(refusal, InvalidArgument)
            else reconstruction_pb2.RECONSTRUCTION_REFUSAL_CODE_FAILED_PRECONDITION
        ),
        reason=refusal.reason,
        message=refusal.message,
        metadata=refusal.metadata,
    )


class ReconstructionServicer(reconstruction_pb2_grpc.ReconstructionServiceServicer):
    """Stateless: any replica gives the same bytes for the same request. Results are cached by
    the content of their inputs (shared.runtime.content_cache); a cached answer is the answer
    the computation gives, so the cache changes latency only."""

    def __init__(
        self,
        reconstructions: ContentCache[ReconstructionResult] | None = None,
        analyses: ContentCache[ResponseAnalysis] | None = None,
        reproductions: ContentCache[PendingRequest] | None = None,
        *,
        runner: Runner | None = None,
    ) -> None:
        # The pinned SDK's work on callers' bytes runs in worker processes, bounded in time and
        # stopped at the caller's deadline (ADR 0048).
        self.runner = runner if runner is not None else shared_runner()
        self._reconstructions = reconstructions if reconstructions is not None else ContentCache()
        self._analyses = analyses if analyses is not None else ContentCache()
        self._reproductions = reproductions if reproductions is not None else ContentCache()

    def caches(self) -> dict[str, ContentCache[Any]]:
        """The three caches by name (their hit and miss counters are exported as metrics)."""
        return {
            "reconstructions": self._reconstructions,
            "analyses": self._analyses,
            "reproductions": self._reproductions,
        }

    def _analysis(self, checkpoint: bytes, raw: bytes) -> ResponseAnalysis:
        return self._analyses.get_or_compute(
            content_key("analyze", checkpoint, raw),
            lambda: self.runner.run(analyze_consumed_response, checkpoint, raw),
        )

    def _reconstruction(
        self, checkpoint: bytes, raw: bytes, version: int, consumed_at: str
    ) -> ReconstructionResult:
        return self._reconstructions.get_or_compute(
            content_key("reconstruct", checkpoint, raw, version, consumed_at),
            lambda: self.runner.run(
                reconstruct_invalid_read, checkpoint, raw, version, consumed_at
            ),
        )

    def ReconstructInvalidRead(
        self, request: reconstruction_pb2.ReconstructInvalidReadRequest, context: Any
    ) -> reconstruction_pb2.ReconstructInvalidReadResponse:
        _require(request, "checkpoint", "raw_response", "consumed_at")
        version = _version(request.version)
        return _reconstruction_to_proto(
            self._reconstruction(
                request.checkpoint, request.raw_response, version, request.consumed_at
            )
        )

    def AnalyzeConsumedResponse(
        self, request: reconstruction_pb2.AnalyzeConsumedResponseRequest, context: Any
    ) -> reconstruction_pb2.AnalyzeConsumedResponseResponse:
        _require(request, "checkpoint", "raw_response")
        return _analysis_to_proto(self._analysis(request.checkpoint, request.raw_response))

    def AnalyzeAndReconstructInvalidRead(
        self, request: reconstruction_pb2.AnalyzeAndReconstructInvalidReadRequest, context: Any
    ) -> reconstruction_pb2.AnalyzeAndReconstructInvalidReadResponse:
        _require(request, "checkpoint", "raw_response")
        found = analyze_and_reconstruct_invalid_read(
            request.checkpoint,
            request.raw_response,
            _version(request.version),
            request.consumed_at,
            analyze=self._analysis,
            reconstruct=self._reconstruction,
        )
        return reconstruction_pb2.AnalyzeAndReconstructInvalidReadResponse(
            analysis=_analysis_to_proto(found.analysis),
            reconstruction=(
                _reconstruction_to_proto(found.reconstruction)
                if found.reconstruction is not None
                else None
            ),
            reconstruction_refusal=(
                _refusal_to_proto(found.refusal) if found.refusal is not None else None
            ),
        )

    def ReconstructReadonlyObservation(
        self, request: reconstruction_pb2.ReconstructReadonlyObservationRequest, context: Any
    ) -> reconstruction_pb2.ReconstructReadonlyObservationResponse:
        _require(request, "derived_checkpoint", "raw_response", "consumed_at")
        retained: dict[str, Any] = {}
        for index, found in enumerate(request.retained_results):
            name = f"retained_results[{index}].result_json"
            try:
                retained[found.call_id] = parse_json(found.result_json)
            except CanonicalJsonError as exc:
                raise InvalidArgument(
                    "FIELD_INVALID",
                    f"{name} is not JSON",
                    metadata={"field": name},
                    field_violations=[FieldViolation(name, "not JSON")],
                ) from exc
        result = self.runner.run(
            reconstruct_readonly_observation,
            request.derived_checkpoint,
            request.raw_response,
            request.consumed_at,
            retained,
        )
        return reconstruction_pb2.ReconstructReadonlyObservationResponse(
            derived_checkpoint=result.derived_checkpoint,
            derived_checkpoint_digest=result.derived_checkpoint_digest,
            witness_json=result.witness_json,
            witness_digest=result.witness_digest,
            accounting_json=result.accounting_json,
        )

    def ReproducePendingRequest(
        self, request: reconstruction_pb2.ReproducePendingRequestRequest, context: Any
    ) -> reconstruction_pb2.ReproducePendingRequestResponse:
        _require(request, "derived_checkpoint")
        derived = request.derived_checkpoint
        found = self._reproductions.get_or_compute(
            content_key("reproduce", derived),
            lambda: self.runner.run(reproduce_pending_request, derived),
        )
        digests = found.part_digests
        return reconstruction_pb2.ReproducePendingRequestResponse(
            derived_checkpoint_digest=found.derived_checkpoint_digest,
            method=found.method,
            url=found.url,
            model=found.model,
            wire_request=found.wire,
            wire_digest=found.wire_digest,
            wire_length=found.wire_length,
            parts_json=found.parts_json,
            history_digest=digests["history"],
            model_settings_digest=digests["model_settings"],
            tool_definitions_digest=digests["tool_definitions"],
            request_parameters_digest=digests["request_parameters"],
            usage_digest=digests["usage"],
            limits_digest=digests["limits"],
            reproduction_digest=found.reproduction_digest,
        )


def _worker_families(runner: IsolatedRunner) -> Iterator[Metric]:
    """The worker processes free now, and the computations stopped (by reason)."""
    yield gauge_family(
        "forge_reconstruction_workers_idle",
        "Reconstruction worker processes started and free now (FORGE_RECONSTRUCTION_WORKERS)",
        runner.idle,
    )
    yield counter_family(
        "forge_reconstruction_stopped",
        "Computations stopped and their worker replaced, by the reason the caller was given "
        "(the caller's deadline or cancellation, RECONSTRUCTION_TIME_LIMIT, WORKER_FAILED)",
        "reason",
        dict(runner.stopped_by),
    )


def bindings(servicer: ReconstructionServicer | None = None) -> list[ServiceBinding]:
    """The service, served by ``servicer`` (default: one on the process's worker processes)."""
    if servicer is None:
        servicer = ReconstructionServicer()
    runner = servicer.runner
    if isinstance(runner, IsolatedRunner):
        export_at_scrape("reconstruction_workers", partial(_worker_families, runner))
    # The hit rate operators watch: hits / (hits + misses), per cache.
    export_at_scrape(
        "reconstruction_cache",
        lambda: cache_families("forge_reconstruction_cache", servicer.caches()),
    )
    return [
        service_binding(
            reconstruction_pb2.DESCRIPTOR.services_by_name["ReconstructionService"],
            partial(getattr, servicer),
        )
    ]
