"""Issue 46 §5, traces across processes: one admission sent to the HTTP gateway with a W3C
``traceparent`` is followed through the gateway, admission, candidate and ledger processes, each
started as ``make run`` starts it and exporting its spans over OTLP/gRPC to a receiver in this
test; every one of the four reports spans of the caller's one trace id."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from forge.continuity.v1 import candidate_pb2, candidate_pb2_grpc, common_pb2, policy_pb2
from services.demo.seed import load_fixture, seed_held_run
from tests.admission.conftest import submission
from tests.conftest import postgres_schema
from tests.polyglot.process import _child_environment, _free_port
from tests.reliability.processes import KillableLedger, ServiceProcess

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_SPAN_ID = "b7ad6b7169203331"
SERVICES = ("gateway", "admission", "candidate", "ledger")
DEADLINE_SECONDS = 60.0


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC trace receiver: (service.name, trace id, span name) of every span exported."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        for resource_spans in request.resource_spans:
            service = next(
                (
                    a.value.string_value
                    for a in resource_spans.resource.attributes
                    if a.key == "service.name"
                ),
                "",
            )
            for scope in resource_spans.scope_spans:
                with self._lock:
                    self.spans += [(service, s.trace_id.hex(), s.name) for s in scope.spans]
        return trace_service_pb2.ExportTraceServiceResponse()

    def services_in(self, trace_id: str) -> set[str]:
        with self._lock:
            return {service for service, trace, _name in self.spans if trace == trace_id}


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    found = Receiver()
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(found, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield found, f"http://127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


def _gateway(env: dict[str, str], workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    log = (workdir / "gateway.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "services.gateway", "--port", str(port)],
        cwd=workdir,
        env={**_child_environment(), **env},
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/v1/runs/none", timeout=1)  # noqa: S310
        except urllib.error.HTTPError:
            return process, url  # it answers (401: no credentials)
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, "no gateway"
            time.sleep(0.1)


def test_one_admission_is_one_trace_across_gateway_admission_candidate_and_ledger(
    receiver: tuple[Receiver, str], tmp_path: Path
) -> None:
    found, endpoint = receiver
    otlp = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    with postgres_schema() as database_url, ExitStack() as stack:
        ledger = KillableLedger(database_url, tmp_path, env=otlp)
        reconstruction = ServiceProcess("reconstruction", tmp_path, env=otlp)
        calls = {
            **otlp,
            "FORGE_LEDGER_TARGET": ledger.target,
            "FORGE_RECONSTRUCTION_TARGET": reconstruction.target,
        }
        candidate = ServiceProcess(
            "candidate", tmp_path, env={**calls, "FORGE_SERVICE_TOKEN": "candidate-service-token"}
        )
        admission = ServiceProcess(
            "admission",
            tmp_path,
            env={
                **calls,
                "FORGE_CANDIDATE_TARGET": candidate.target,
                "FORGE_SERVICE_TOKEN": "service-token",
            },
        )
        processes = [ledger, reconstruction, candidate, admission]
        for process in processes:
            stack.callback(process.stop)
            process.launch()
        for process in processes:
            process.wait_serving()
        gateway, url = _gateway(
            {
                **otlp,
                "FORGE_LEDGER_TARGET": ledger.target,
                "FORGE_CANDIDATE_TARGET": candidate.target,
                "FORGE_ADMISSION_TARGET": admission.target,
            },
            tmp_path,
        )
        stack.callback(gateway.wait, 30)
        stack.callback(gateway.terminate)

        clients = ledger.clients()
        seed_held_run(clients.ledger(), load_fixture("v1_basic"), "run-trace")
        policy = clients.policy()
        current = policy.GetPolicy(policy_pb2.GetPolicyRequest(), timeout=30).policy
        policy.PutPolicy(
            policy_pb2.PutPolicyRequest(
                expected_revision=current.revision,
                settings=common_pb2.PolicySettings(enabled=True, window_seconds=3600),
            ),
            timeout=30,
        )
        candidates = candidate_pb2_grpc.CandidateServiceStub(
            candidate.served().channel("operator-token")
        )
        found_candidate = candidates.GetInvalidReadContinuityCandidate(
            candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id="run-trace"), timeout=60
        ).candidate
        body = json_format.MessageToDict(submission(found_candidate, request_id="req-trace"))
        request = urllib.request.Request(  # noqa: S310 - loopback
            f"{url}/api/v1/runs/run-trace/invalid-read-continuity/requests/req-trace",
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                "authorization": "Bearer operator-token",
                "content-type": "application/json",
                "traceparent": f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01",
            },
        )
        with urllib.request.urlopen(request, timeout=60) as reply:  # noqa: S310
            assert reply.status == 200
            assert json.loads(reply.read())["created"] is True

        deadline = time.monotonic() + DEADLINE_SECONDS
        while True:
            names = found.services_in(TRACE_ID)
            reached = {s for s in SERVICES if any(name.endswith(f"-{s}") for name in names)}
            if reached == set(SERVICES) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert reached == set(SERVICES), (names, len(found.spans))
