"""The candidate's remembered reconstruction answers (ADR 0028), journals (ADR 0030) and
candidates read before their admission (ADR 0066) are counted on a real /metrics endpoint, wired
as the service builds itself: two reads of the same held run are one miss and one hit of each of
the first two, and of two admission reads after them the first takes the remembered candidate."""

from __future__ import annotations

from forge.continuity.v1 import candidate_pb2, candidate_pb2_grpc
from services.candidate.__main__ import build
from shared.runtime.config import Settings
from shared.runtime.metrics import serve_metrics
from tests.candidate.conftest import Stack
from tests.polyglot.process import _free_port
from tests.support import cache_counts, serve

PREFIX = "forge_candidate_cache"
CACHE = "analysis_and_reconstruction"
JOURNALS = "run_snapshot"
EVALUATIONS = "evaluation"


def test_two_reads_of_one_run_are_a_miss_then_a_hit(stack: Stack) -> None:
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-counted")
    settings = Settings(
        service="candidate",
        host="127.0.0.1",
        port=0,
        service_token="candidate-service-token",
        targets={
            "ledger": stack.ledger_served.target,
            "reconstruction": stack.reconstruction_served.target,
        },
    )
    # The candidate reads no principals file of its own.
    built = build(settings, None)  # type: ignore[arg-type]
    endpoint = serve_metrics("127.0.0.1", _free_port())
    assert endpoint is not None
    try:
        with serve("candidate", built.bindings) as served:
            stub = candidate_pb2_grpc.CandidateServiceStub(served.channel("operator-token"))
            request = candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id="run-counted")
            before = cache_counts(endpoint.port, PREFIX)
            first = stub.GetInvalidReadContinuityCandidate(request).candidate
            second = stub.GetInvalidReadContinuityCandidate(request).candidate
            remembered = cache_counts(endpoint.port, PREFIX)
            # the admission's read takes the operator's candidate; the one after it evaluates
            request.include_admission_inputs = True
            admitted = [stub.GetInvalidReadContinuityCandidate(request) for _ in range(2)]
            after = cache_counts(endpoint.port, PREFIX)
    finally:
        endpoint.stop()
        built.cleanup()
    assert first.eligible and first == second
    assert admitted[0] == admitted[1] and admitted[0].candidate == first
    assert remembered[("forge_candidate_cache_bytes", EVALUATIONS)] > 0
    assert remembered[("forge_candidate_cache_hits_total", EVALUATIONS)] == 0
    assert after[("forge_candidate_cache_hits_total", EVALUATIONS)] == 1
    assert after[("forge_candidate_cache_misses_total", EVALUATIONS)] == 1
    assert after[("forge_candidate_cache_bytes", EVALUATIONS)] == 0
    assert before[("forge_candidate_cache_misses_total", CACHE)] == 0
    assert remembered[("forge_candidate_cache_misses_total", CACHE)] == 1
    assert remembered[("forge_candidate_cache_hits_total", CACHE)] == 1
    assert remembered[("forge_candidate_cache_bytes", CACHE)] > 0
    assert before[("forge_candidate_cache_misses_total", JOURNALS)] == 0
    assert remembered[("forge_candidate_cache_misses_total", JOURNALS)] == 1
    assert remembered[("forge_candidate_cache_hits_total", JOURNALS)] == 1
    assert remembered[("forge_candidate_cache_bytes", JOURNALS)] > 0
