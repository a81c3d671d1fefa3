"""The reconstruction cache's hit and miss counters reach a real /metrics endpoint: two identical
reconstructions through a real server on loopback are one miss and one hit."""

from __future__ import annotations

import json
from pathlib import Path

from forge.continuity.v1 import reconstruction_pb2, reconstruction_pb2_grpc
from services.reconstruction.servicer import bindings
from shared.runtime.metrics import serve_metrics
from tests.polyglot.process import _free_port
from tests.support import cache_counts, serve

CASE = Path(__file__).resolve().parents[1] / "data" / "fixtures" / "v1_basic"
MANIFEST = json.loads((CASE.parent / "manifest.json").read_text())
PREFIX = "forge_reconstruction_cache"


def test_two_identical_reconstructions_are_a_miss_then_a_hit() -> None:
    endpoint = serve_metrics("127.0.0.1", _free_port())
    assert endpoint is not None
    try:
        with serve("reconstruction", bindings()) as served:
            stub = reconstruction_pb2_grpc.ReconstructionServiceStub(
                served.channel("candidate-service-token")
            )
            request = reconstruction_pb2.ReconstructInvalidReadRequest(
                checkpoint=(CASE / "checkpoint.json").read_bytes(),
                raw_response=(CASE / "raw_response.json").read_bytes(),
                version=reconstruction_pb2.RECONSTRUCTION_VERSION_V1,
                consumed_at=MANIFEST["v1_basic"]["consumed_at"],
            )
            before = cache_counts(endpoint.port, PREFIX)
            workers = cache_counts(endpoint.port, "forge_reconstruction_workers")
            assert before[("forge_reconstruction_cache_hits_total", "reconstructions")] == 0
            stub.ReconstructInvalidRead(request)
            stub.ReconstructInvalidRead(request)
            after = cache_counts(endpoint.port, PREFIX)
    finally:
        endpoint.stop()
    assert after[("forge_reconstruction_cache_misses_total", "reconstructions")] == 1
    assert after[("forge_reconstruction_cache_hits_total", "reconstructions")] == 1
    assert after[("forge_reconstruction_cache_bytes", "reconstructions")] > 0
    # The worker processes are reported beside the caches (ADR 0048).
    assert ("forge_reconstruction_workers_idle", "") in workers
