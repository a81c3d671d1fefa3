"""AnalyzeAndReconstructInvalidRead over a real server: the analysis exactly as
AnalyzeConsumedResponse gives it and, only when the analysis holds nothing for the version and a
consumption time is given, ReconstructInvalidRead's result or its refusal as data; the same
answers, byte for byte, as the two separate calls to another server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from forge.continuity.v1 import reconstruction_pb2, reconstruction_pb2_grpc
from services.reconstruction.servicer import ReconstructionServicer
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.runtime.content_cache import ContentCache
from shared.runtime.errors import InvalidArgument, from_rpc_error
from tests.reconstruction.conftest import MANIFEST, Case, load_case
from tests.support import serve

Stub = reconstruction_pb2_grpc.ReconstructionServiceStub
ENUM = {
    1: reconstruction_pb2.RECONSTRUCTION_VERSION_V1,
    2: reconstruction_pb2.RECONSTRUCTION_VERSION_V2,
}
REFUSAL = reconstruction_pb2.ReconstructionRefusalCode
CODES = {
    grpc.StatusCode.FAILED_PRECONDITION: REFUSAL.RECONSTRUCTION_REFUSAL_CODE_FAILED_PRECONDITION,
    grpc.StatusCode.INVALID_ARGUMENT: REFUSAL.RECONSTRUCTION_REFUSAL_CODE_INVALID_ARGUMENT,
}


@pytest.fixture(scope="module")
def combined() -> Iterator[Stub]:
    with serve("reconstruction", reconstruction_bindings()) as served:
        yield Stub(served.channel("candidate-service-token"))


@pytest.fixture(scope="module")
def separate() -> Iterator[Stub]:
    """Another server (its own caches) for the two separate calls the answers are compared to."""
    with serve("reconstruction", reconstruction_bindings()) as served:
        yield Stub(served.channel("candidate-service-token"))


def _request(
    case: Case, version: int, consumed_at: str | None = None
) -> reconstruction_pb2.AnalyzeAndReconstructInvalidReadRequest:
    return reconstruction_pb2.AnalyzeAndReconstructInvalidReadRequest(
        checkpoint=case.checkpoint,
        raw_response=case.raw_response,
        version=ENUM[version],
        consumed_at=case.consumed_at if consumed_at is None else consumed_at,
    )


def _refusal(error: grpc.RpcError) -> tuple[Any, ...]:
    found = from_rpc_error(error)
    return (CODES[error.code()], found.reason, found.message, found.metadata)  # type: ignore[attr-defined]


def _two_calls(stub: Stub, case: Case, version: int, consumed_at: str) -> tuple[Any, ...]:
    """What a caller of the two RPCs gets, asking for the reconstruction as the candidate does."""
    try:
        analysis = stub.AnalyzeConsumedResponse(
            reconstruction_pb2.AnalyzeConsumedResponseRequest(
                checkpoint=case.checkpoint, raw_response=case.raw_response
            )
        )
    except grpc.RpcError as error:
        return ("analysis refused", *_refusal(error))
    holds = list(analysis.common_holds) + list(
        analysis.v1_holds if version == 1 else analysis.v2_holds
    )
    if holds or not consumed_at:
        return (analysis.SerializeToString(deterministic=True), None)
    try:
        derived = stub.ReconstructInvalidRead(
            reconstruction_pb2.ReconstructInvalidReadRequest(
                checkpoint=case.checkpoint,
                raw_response=case.raw_response,
                version=ENUM[version],
                consumed_at=consumed_at,
            )
        )
    except grpc.RpcError as error:
        return (analysis.SerializeToString(deterministic=True), _refusal(error))
    return (
        analysis.SerializeToString(deterministic=True),
        derived.SerializeToString(deterministic=True),
    )


def _one_call(stub: Stub, case: Case, version: int, consumed_at: str) -> tuple[Any, ...]:
    try:
        found = stub.AnalyzeAndReconstructInvalidRead(_request(case, version, consumed_at))
    except grpc.RpcError as error:
        return ("analysis refused", *_refusal(error))
    analysis = found.analysis.SerializeToString(deterministic=True)
    outcome = found.WhichOneof("reconstruction_outcome")
    if outcome == "reconstruction":
        return (analysis, found.reconstruction.SerializeToString(deterministic=True))
    if outcome == "reconstruction_refusal":
        refusal = found.reconstruction_refusal
        return (analysis, (refusal.code, refusal.reason, refusal.message, dict(refusal.metadata)))
    return (analysis, None)


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_one_call_answers_exactly_as_the_two_calls(
    combined: Stub, separate: Stub, name: str, version: int
) -> None:
    case = load_case(name)
    assert _one_call(combined, case, version, case.consumed_at) == _two_calls(
        separate, case, version, case.consumed_at
    )


def test_an_analysis_hold_returns_the_analysis_only(combined: Stub, separate: Stub) -> None:
    case = load_case("refused_valid_query")
    found = combined.AnalyzeAndReconstructInvalidRead(_request(case, 1))
    assert [h.reason for h in found.analysis.common_holds] == ["EVIDENCE_QUERY_VALID"]
    assert found.WhichOneof("reconstruction_outcome") is None
    # A hold of one version only: that version gets the analysis only, the other the result.
    sibling = load_case("v2_list_sibling")
    held = combined.AnalyzeAndReconstructInvalidRead(_request(sibling, 1))
    assert [h.reason for h in held.analysis.v1_holds] == ["SIBLING_CALL_REFUSED"]
    assert held.WhichOneof("reconstruction_outcome") is None
    derived = combined.AnalyzeAndReconstructInvalidRead(_request(sibling, 2))
    assert derived.WhichOneof("reconstruction_outcome") == "reconstruction"


def test_without_a_consumption_time_only_the_analysis_is_returned(combined: Stub) -> None:
    found = combined.AnalyzeAndReconstructInvalidRead(_request(load_case("v1_basic"), 1, ""))
    assert found.HasField("analysis")
    assert found.WhichOneof("reconstruction_outcome") is None


def test_a_reconstruction_refusal_is_a_typed_refusal_not_a_failed_call(
    combined: Stub, separate: Stub
) -> None:
    case = load_case("refused_contract_description")
    found = combined.AnalyzeAndReconstructInvalidRead(_request(case, 1))
    refusal = found.reconstruction_refusal
    assert found.WhichOneof("reconstruction_outcome") == "reconstruction_refusal"
    assert (refusal.code, refusal.reason, dict(refusal.metadata)) == (
        reconstruction_pb2.RECONSTRUCTION_REFUSAL_CODE_FAILED_PRECONDITION,
        "CONTRACT_MIGRATION_REFUSED",
        {"element": "tools/list_files/description"},
    )
    assert not list(found.analysis.common_holds) and not list(found.analysis.v1_holds)
    # An invalid consumption time: INVALID_ARGUMENT there, a refusal with that code here.
    basic = load_case("v1_basic")
    late = combined.AnalyzeAndReconstructInvalidRead(_request(basic, 1, "yesterday"))
    assert (late.reconstruction_refusal.code, late.reconstruction_refusal.reason) == (
        reconstruction_pb2.RECONSTRUCTION_REFUSAL_CODE_INVALID_ARGUMENT,
        "CONSUMED_AT_INVALID",
    )
    assert _one_call(combined, basic, 1, "yesterday") == _two_calls(separate, basic, 1, "yesterday")


def test_a_reconstruction_has_the_digests_of_the_separate_call(
    combined: Stub, separate: Stub, basic: Case
) -> None:
    found = combined.AnalyzeAndReconstructInvalidRead(_request(basic, 1))
    alone = separate.ReconstructInvalidRead(
        reconstruction_pb2.ReconstructInvalidReadRequest(
            checkpoint=basic.checkpoint,
            raw_response=basic.raw_response,
            version=reconstruction_pb2.RECONSTRUCTION_VERSION_V1,
            consumed_at=basic.consumed_at,
        )
    )
    assert found.reconstruction.derived_checkpoint_digest == alone.derived_checkpoint_digest
    assert found.reconstruction.witness_digest == alone.witness_digest
    assert found.reconstruction.derived_checkpoint == alone.derived_checkpoint


def test_an_analysis_refusal_fails_the_call_as_the_analysis_does(
    combined: Stub, separate: Stub
) -> None:
    case = load_case("refused_digest")
    with pytest.raises(grpc.RpcError) as one:
        combined.AnalyzeAndReconstructInvalidRead(_request(case, 1))
    with pytest.raises(grpc.RpcError) as alone:
        separate.AnalyzeConsumedResponse(
            reconstruction_pb2.AnalyzeConsumedResponseRequest(
                checkpoint=case.checkpoint, raw_response=case.raw_response
            )
        )
    assert _refusal(one.value) == _refusal(alone.value)
    assert from_rpc_error(one.value).reason == "CHECKPOINT_DIGEST_MISMATCH"


@pytest.mark.parametrize(
    ("cleared", "reason"),
    [
        ("checkpoint", "FIELD_REQUIRED"),
        ("raw_response", "FIELD_REQUIRED"),
        ("version", "VERSION_UNSUPPORTED"),
    ],
)
def test_malformed_requests_are_invalid_arguments(
    combined: Stub, basic: Case, cleared: str, reason: str
) -> None:
    request = _request(basic, 1)
    request.ClearField(cleared)  # type: ignore[arg-type]
    with pytest.raises(grpc.RpcError) as caught:
        combined.AnalyzeAndReconstructInvalidRead(request)
    error = from_rpc_error(caught.value)
    assert isinstance(error, InvalidArgument)
    assert (error.reason, error.metadata) == (reason, {"field": cleared})


def _separately(servicer: ReconstructionServicer, case: Case, version: int) -> None:
    servicer.AnalyzeConsumedResponse(
        reconstruction_pb2.AnalyzeConsumedResponseRequest(
            checkpoint=case.checkpoint, raw_response=case.raw_response
        ),
        None,
    )
    servicer.ReconstructInvalidRead(
        reconstruction_pb2.ReconstructInvalidReadRequest(
            checkpoint=case.checkpoint,
            raw_response=case.raw_response,
            version=ENUM[version],
            consumed_at=case.consumed_at,
        ),
        None,
    )


def _counts(analyses: ContentCache[Any], reconstructions: ContentCache[Any]) -> tuple[int, ...]:
    return (analyses.misses, analyses.hits, reconstructions.misses, reconstructions.hits)


@pytest.mark.parametrize("one_call_first", [True, False])
def test_the_content_cache_serves_both_parts_across_the_rpcs(
    basic: Case, one_call_first: bool
) -> None:
    analyses: ContentCache[Any] = ContentCache()
    reconstructions: ContentCache[Any] = ContentCache()
    servicer = ReconstructionServicer(reconstructions=reconstructions, analyses=analyses)
    if one_call_first:
        servicer.AnalyzeAndReconstructInvalidRead(_request(basic, 1), None)
        _separately(servicer, basic, 1)
    else:
        _separately(servicer, basic, 1)
        servicer.AnalyzeAndReconstructInvalidRead(_request(basic, 1), None)
    # Each part computed once, then answered from the cache, whichever RPC asked first.
    assert _counts(analyses, reconstructions) == (1, 1, 1, 1)
