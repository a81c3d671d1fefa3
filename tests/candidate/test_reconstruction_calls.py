"""The candidate asks reconstruction once per invalid-read candidate
(AnalyzeAndReconstructInvalidRead) and gets exactly the candidate, holds, digests and admission
inputs the two separate calls give. Calls are counted by a client interceptor on the real channel
to the real reconstruction server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import pytest

from forge.continuity.v1 import candidate_pb2, candidate_pb2_grpc, common_pb2, policy_pb2
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings as candidate_bindings
from shared.contract.channels import open_channel
from tests.candidate.conftest import NOW, Stack
from tests.support import serve

RECONSTRUCTION = "/forge.continuity.v1.ReconstructionService/"


class Counting(grpc.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]
    """Records the method of every unary call made through the channel."""

    def __init__(self) -> None:
        self.methods: list[str] = []

    def intercept_unary_unary(
        self, continuation: Callable[[Any, Any], Any], details: Any, request: Any
    ) -> Any:
        self.methods.append(details.method)
        return continuation(details, request)


class TwoCallSources(GrpcCandidateSources):
    """The same gRPC sources without the combined call: the candidate then asks for the
    analysis and the reconstruction separately (a protocol method set to None is not offered)."""

    analyze_and_reconstruct = None  # type: ignore[assignment]


@contextmanager
def _candidate(
    stack: Stack, sources_class: type[GrpcCandidateSources]
) -> Iterator[tuple[candidate_pb2_grpc.CandidateServiceStub, Counting]]:
    counting = Counting()
    ledger = open_channel(stack.ledger_served.target, "service-token")
    reconstruction = open_channel(stack.reconstruction_served.target, "candidate-service-token")
    sources = sources_class(ledger, grpc.intercept_channel(reconstruction, counting))
    try:
        with serve("candidate", candidate_bindings(sources, clock=lambda: NOW)) as served:
            yield stack.candidates(served=served), counting
    finally:
        ledger.close()
        reconstruction.close()


def _read(
    stub: candidate_pb2_grpc.CandidateServiceStub, run_id: str, version: int
) -> candidate_pb2.GetInvalidReadContinuityCandidateResponse:
    response: candidate_pb2.GetInvalidReadContinuityCandidateResponse = (
        stub.GetInvalidReadContinuityCandidate(
            candidate_pb2.GetInvalidReadContinuityCandidateRequest(
                run_id=run_id, version=version, include_admission_inputs=True
            )
        )
    )
    return response


def _reconstruction_calls(counting: Counting) -> list[str]:
    return [
        m.removeprefix(RECONSTRUCTION) for m in counting.methods if m.startswith(RECONSTRUCTION)
    ]


def test_an_eligible_candidate_read_makes_one_reconstruction_call(stack: Stack) -> None:
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-one")
    with _candidate(stack, GrpcCandidateSources) as (stub, counting):
        one = _read(stub, "run-one", 1)
    assert one.candidate.eligible
    assert _reconstruction_calls(counting) == ["AnalyzeAndReconstructInvalidRead"]
    with _candidate(stack, TwoCallSources) as (stub, counting):
        two = _read(stub, "run-one", 1)
    assert _reconstruction_calls(counting) == ["AnalyzeConsumedResponse", "ReconstructInvalidRead"]
    # The same candidate, digests and proof, and the same inputs for admission to reuse.
    assert one.SerializeToString(deterministic=True) == two.SerializeToString(deterministic=True)
    assert one.admission_inputs.derived_checkpoint
    assert one.candidate.proof.derived_checkpoint_digest == (
        one.admission_inputs.derived_checkpoint_digest
    )


@pytest.mark.parametrize(
    ("fixture", "version", "separately"),
    [
        # An analysis hold: no reconstruction asked for, one call either way.
        ("refused_valid_query", 1, ["AnalyzeConsumedResponse"]),
        # A hold of version 1 only (a list_files sibling); version 2 is eligible.
        ("v2_list_sibling", 1, ["AnalyzeConsumedResponse"]),
        ("v2_list_sibling", 2, ["AnalyzeConsumedResponse", "ReconstructInvalidRead"]),
        # The analysis allows it and the reconstruction refuses (a typed refusal, then a hold).
        (
            "refused_contract_description",
            1,
            ["AnalyzeConsumedResponse", "ReconstructInvalidRead"],
        ),
        # The analysis itself refuses.
        ("refused_digest", 1, ["AnalyzeConsumedResponse"]),
    ],
)
def test_held_and_eligible_candidates_are_those_of_the_two_calls(
    stack: Stack, fixture: str, version: int, separately: list[str]
) -> None:
    policy = stack.policy()
    current = policy.GetPolicy(policy_pb2.GetPolicyRequest()).policy
    policy.PutPolicy(
        policy_pb2.PutPolicyRequest(
            expected_revision=current.revision,
            settings=common_pb2.PolicySettings(
                enabled=True, window_seconds=3600, allow_unavailable_source_observations=True
            ),
        )
    )
    stack.seed(fixture, "run-held")
    with _candidate(stack, GrpcCandidateSources) as (stub, counting):
        one = _read(stub, "run-held", version)
    assert _reconstruction_calls(counting) == ["AnalyzeAndReconstructInvalidRead"]
    with _candidate(stack, TwoCallSources) as (stub, counting):
        two = _read(stub, "run-held", version)
    assert _reconstruction_calls(counting) == separately
    assert one.SerializeToString(deterministic=True) == two.SerializeToString(deterministic=True)
    assert one.candidate.eligible == (fixture == "v2_list_sibling" and version == 2)


def test_the_same_bytes_are_asked_once_and_a_refusal_each_time(stack: Stack) -> None:
    """Reconstruction's answer is remembered by the bytes, version and consumption time it was
    computed from (ADR 0028): a second read of the run gives the same candidate without a call,
    another version asks again; an answer carrying a reconstruction refusal is asked again."""
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-one")
    with _candidate(stack, GrpcCandidateSources) as (stub, counting):
        first = _read(stub, "run-one", 1)
        second = _read(stub, "run-one", 1)
        assert _reconstruction_calls(counting) == ["AnalyzeAndReconstructInvalidRead"]
        assert first.SerializeToString(deterministic=True) == second.SerializeToString(
            deterministic=True
        )
        _read(stub, "run-one", 2)
        assert _reconstruction_calls(counting) == ["AnalyzeAndReconstructInvalidRead"] * 2
    stack.seed("refused_contract_description", "run-refused")
    with _candidate(stack, GrpcCandidateSources) as (stub, counting):
        for _ in range(2):
            assert not _read(stub, "run-refused", 1).candidate.eligible
        assert _reconstruction_calls(counting) == ["AnalyzeAndReconstructInvalidRead"] * 2
