"""The floors of an admission's own call graph (issue 50 §2, ADR 0068): what its four gRPC hops
cost with the real messages and no domain work.

An admission crosses four hops (operator → admission; admission → candidate; candidate → ledger
``GetRunSnapshot``; admission → ledger ``CommitAdmission``; bench/hops.py counts them) over three
processes. Each floor here is that call graph, with the request and response of every hop those
of one real admission (``bench.hops.sample_admission``: about 10 KB each way for the commit, 12 KB
for the candidate's answer), answered from those samples instead of computed; the ledger's commit
runs the bare baseline's one 3-row insert transaction, as the six-hop floor's last hop does.

- ``bare``: plain gRPC servers and channels and the contract's message classes, nothing else
  (no authentication, gate, call policy, metrics or deadlines): the call graph and its messages.
- ``runtime``: every process hosted as the services are (``shared.runtime.bootstrap.run_service``:
  the gate, the principals and their tokens, the call policy, metrics, deadlines, the service
  channels), with the contract's bindings: the project's runtime on top of the bare floor.

A process of a floor is ``python -m bench.runtime_floor {bare|runtime} SERVICE``, started by
``bench.stack.services(command=…)`` in the place of the service; it reads the samples from the
file ``SAMPLES_VARIABLE`` names. Figure 1 (``make bench``, ``make bench-admission``) times both
in each of its rounds beside the six-hop floor and the admission (``admission_floors``,
``floor_calls``; bench.floors.call_graph_floor_figure).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from concurrent import futures
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import grpc
from google.protobuf.message_factory import GetMessageClass

from bench.baseline import insert_handler
from shared.contract import method_facts
from shared.contract.channels import service_channel
from shared.contract.modules import SERVICES
from shared.runtime.auth import PrincipalsFile
from shared.runtime.bootstrap import BuildResult, run_service
from shared.runtime.config import Settings, port_variable, target_variable
from shared.runtime.stop_signal import wait_for_stop_signal

# A floor's own processes import none of the bench's drivers (bench.hops, bench.stack and
# bench.figures load the services' domain): those are imported where the bench process uses them.
if TYPE_CHECKING:
    from bench.load import Throughput
    from bench.stack import Services

#: The file (JSON: hop name → base64 request and response) a floor process answers from.
SAMPLES_VARIABLE: Final = "FORGE_BENCH_ADMISSION_SAMPLES"
VARIANTS: Final = ("bare", "runtime")
BARE_WORKERS: Final = 16

ADMIT: Final = "operator -> RequestInvalidReadContinuity"
CANDIDATE: Final = "admission -> GetInvalidReadContinuityCandidate"
SNAPSHOT: Final = "candidate -> GetRunSnapshot"
COMMIT: Final = "admission -> CommitAdmission"
HOPS: Final = (ADMIT, CANDIDATE, SNAPSHOT, COMMIT)

#: Each floor process's service, and the hops it answers (by its contract's method name).
SERVED: Final[Mapping[str, tuple[str, tuple[str, ...]]]] = {
    "admission": ("AdmissionService", (ADMIT,)),
    "candidate": ("CandidateService", (CANDIDATE,)),
    "ledger": ("LedgerService", (SNAPSHOT, COMMIT)),
    "reconstruction": ("ReconstructionService", ()),
}
#: Whom each floor process calls, as the service does.
CALLS: Final[Mapping[str, tuple[str, ...]]] = {
    "admission": ("candidate", "ledger"),
    "candidate": ("ledger",),
}

Answer = Callable[[Any, grpc.ServicerContext], Any]


def write_samples(samples: Mapping[str, tuple[bytes, bytes]], path: Path) -> None:
    missing = sorted(set(HOPS) - set(samples))
    if missing:
        raise RuntimeError(f"an admission's samples lack the hops {missing}")
    encoded = {
        name: [base64.b64encode(request).decode(), base64.b64encode(response).decode()]
        for name, (request, response) in samples.items()
        if name in HOPS
    }
    path.write_text(json.dumps(encoded), encoding="utf-8")


def read_samples(path: Path) -> dict[str, tuple[bytes, bytes]]:
    encoded = json.loads(path.read_text(encoding="utf-8"))
    return {
        name: (base64.b64decode(request), base64.b64decode(response))
        for name, (request, response) in encoded.items()
    }


def _method(hop: str) -> str:
    return hop.rsplit(" -> ", 1)[1]


class _Messages:
    """The samples parsed into the contract's classes: each hop's request and response."""

    def __init__(self, samples: Mapping[str, tuple[bytes, bytes]]) -> None:
        self.request: dict[str, Any] = {}
        self.response: dict[str, Any] = {}
        for name, hops in SERVED.values():
            for hop in hops:
                descriptor = SERVICES[name].methods_by_name[_method(hop)]
                request, response = samples[hop]
                self.request[hop] = GetMessageClass(descriptor.input_type).FromString(request)
                self.response[hop] = GetMessageClass(descriptor.output_type).FromString(response)


def _answers(
    service: str, messages: _Messages, call: Callable[[str, str, Any], Any], database_url: str
) -> dict[str, Answer]:
    """Each answered method of ``service``: what it calls downstream (``call(service, method,
    request)``), then its sampled response."""
    if service == "admission":

        def admit(_request: Any, _context: grpc.ServicerContext) -> Any:
            call("candidate", _method(CANDIDATE), messages.request[CANDIDATE])
            call("ledger", _method(COMMIT), messages.request[COMMIT])
            return messages.response[ADMIT]

        return {_method(ADMIT): admit}
    if service == "candidate":

        def candidate(_request: Any, _context: grpc.ServicerContext) -> Any:
            call("ledger", _method(SNAPSHOT), messages.request[SNAPSHOT])
            return messages.response[CANDIDATE]

        return {_method(CANDIDATE): candidate}
    if service == "ledger":
        insert = insert_handler(database_url, 1)

        def snapshot(_request: Any, _context: grpc.ServicerContext) -> Any:
            return messages.response[SNAPSHOT]

        def commit(_request: Any, context: grpc.ServicerContext) -> Any:
            insert(b"x", context)
            return messages.response[COMMIT]

        return {_method(SNAPSHOT): snapshot, _method(COMMIT): commit}
    return {}


def _unanswered(_request: Any, context: grpc.ServicerContext) -> Any:
    context.abort(grpc.StatusCode.UNIMPLEMENTED, "not part of the admission's floor")


def _caller(channels: Mapping[str, grpc.Channel]) -> Callable[[str, str, Any], Any]:
    """``call(service, method, request)`` over ``channels``, with the contract's classes. Not
    registered methods (``_registered_method``), as the generated stubs the services call
    through are: if anything, a floor's call costs a little more than a service's."""
    methods: dict[tuple[str, str], Any] = {}
    for service, channel in channels.items():
        descriptor = SERVICES[SERVED[service][0]]
        for method in descriptor.methods:
            methods[service, method.name] = channel.unary_unary(
                f"/{descriptor.full_name}/{method.name}",
                request_serializer=GetMessageClass(method.input_type).SerializeToString,
                response_deserializer=GetMessageClass(method.output_type).FromString,
            )

    def call(service: str, method: str, request: Any) -> Any:
        return methods[service, method](request)

    return call


def _serve_bare(service: str, messages: _Messages) -> int:
    channels = {
        name: grpc.insecure_channel(os.environ[target_variable(name)])
        for name in CALLS.get(service, ())
    }
    answers = _answers(service, messages, _caller(channels), os.environ["FORGE_DATABASE_URL"])
    descriptor = SERVICES[SERVED[service][0]]
    handlers = {
        method.name: grpc.unary_unary_rpc_method_handler(
            answers.get(method.name, _unanswered),
            request_deserializer=GetMessageClass(method.input_type).FromString,
            response_serializer=GetMessageClass(method.output_type).SerializeToString,
        )
        for method in descriptor.methods
        if not method.server_streaming
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=BARE_WORKERS))
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(descriptor.full_name, handlers),)
    )
    server.add_insecure_port(f"127.0.0.1:{os.environ[port_variable(service)]}")
    server.start()
    wait_for_stop_signal((signal.SIGTERM, signal.SIGINT))
    server.stop(1).wait()
    for channel in channels.values():
        channel.close()
    return 0


def _serve_runtime(service: str, messages: _Messages) -> int:
    def build(settings: Settings, _principals: PrincipalsFile) -> BuildResult:
        channels = {name: service_channel(settings, name) for name in CALLS.get(service, ())}
        answers = _answers(service, messages, _caller(channels), settings.database_url)
        binding = method_facts.service_binding(
            SERVICES[SERVED[service][0]], lambda name: answers.get(name, _unanswered)
        )

        def close() -> None:
            for channel in channels.values():
                channel.close()

        return BuildResult([binding], close)

    return run_service(
        service,
        [],
        build,
        depends_on=CALLS.get(service, ()),
        preflight=lambda: "serving the admission's runtime floor (bench.runtime_floor)",
    )


def command(variant: str) -> Callable[[str], list[str]]:
    """What ``bench.stack.services`` starts in each service's place for ``variant``."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown floor {variant!r}")
    return lambda service: [sys.executable, "-m", "bench.runtime_floor", variant, service]


@dataclass(frozen=True)
class Floor:
    """One floor's processes, the operator's sampled request it is called with, and the file of
    samples it answers from."""

    services: Services
    request: Any
    samples_file: Path


@contextmanager
def admission_floors(database_url: str) -> Iterator[dict[str, Floor]]:
    """Both floors (``VARIANTS``) running, each over ``database_url``, answering the samples of
    one admission made in a database of its own first (bench.hops.sample_admission)."""
    from bench.hops import counting_database, sample_admission
    from bench.stack import services
    from forge.continuity.v1 import admission_pb2

    # Sampled on SQLite: the messages are the same on either database, and the bench's own
    # schema stays as the figures leave it.
    with counting_database(sqlite=True) as engine:
        samples = sample_admission(engine)
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="forge-floor-")))
        samples_file = scratch / "samples.json"
        write_samples(samples, samples_file)
        request = admission_pb2.RequestInvalidReadContinuityRequest.FromString(samples[ADMIT][0])
        extra = {SAMPLES_VARIABLE: str(samples_file)}
        yield {
            variant: Floor(
                stack.enter_context(
                    services(database_url, env_extra=extra, command=command(variant))
                ),
                request,
                samples_file,
            )
            for variant in VARIANTS
        }


def floor_calls(floor: Floor, calls_each: int) -> Throughput:
    """8 concurrent operators admitting through ``floor``, timed as bench.figures.admitted times
    the admission (one warm-up call each, every answer checked, the floor's processes' CPU
    watched), each call sending the one sampled request."""
    from bench.figures import CALLERS, Clients, admitted

    sent = [floor.request] * (CALLERS * (calls_each + 1))
    return admitted(Clients(floor.services), sent, calls_each)


def main(argv: list[str]) -> int:
    variant, service = argv
    messages = _Messages(read_samples(Path(os.environ[SAMPLES_VARIABLE])))
    return (_serve_bare if variant == "bare" else _serve_runtime)(service, messages)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
