"""``python -m bench.server_model``: the cost per call of the server models ADR 0040 weighed.

One trivial unary method (GetPolicy answering an empty response) hosted three ways on loopback:
the synchronous server as the services ran it before the gate, the synchronous server with the
gate (shared.runtime.start_server today), and gRPC's asyncio server with the same work done in a
coroutine. Eight client threads call it for a fixed number of calls per round; the figure is the
median over rounds of the client-side microseconds per call and the server process's CPU
microseconds per call. Also printed: the gate's own cost, ``intercept_service`` timed alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent import futures
from multiprocessing import Event, Process, Queue
from typing import Any

import grpc

from forge.continuity.v1 import policy_pb2, policy_pb2_grpc
from shared.runtime.auth import ANY_ROLE
from shared.runtime.config import Settings
from shared.runtime.gate import CountingPool, Gate
from shared.runtime.server import service_binding, start_server
from tests.support import directory

CALLERS = 8
CALLS = int(os.environ.get("FORGE_BENCH_MODEL_CALLS", "4000"))
ROUNDS = 3
POLICY = policy_pb2.DESCRIPTOR.services_by_name["PolicyService"]
METHODS = {"GetPolicy", "PutPolicy", "ListPolicyRevisions"}


def _answer(_request: Any, _context: grpc.ServicerContext) -> Any:
    return policy_pb2.GetPolicyResponse()


def _sync(model: str, ports: Queue[int], stop: Any) -> None:
    binding = service_binding(POLICY, dict.fromkeys(METHODS, ANY_ROLE), lambda _name: _answer)
    settings = Settings(service="bench", host="127.0.0.1", port=0)
    if model == "gate":
        running = start_server(settings, [binding], directory())
        ports.put(running.port)
        stop.wait()
        running.stop(0)
        return
    # Before the gate: the same call policy in the handler, no interceptor, a plain pool.
    from shared.runtime.call_policy import CallPolicy
    from shared.runtime.metrics import counted

    server = grpc.server(futures.ThreadPoolExecutor(32))
    policy = CallPolicy(directory(), binding.full_method_roles())
    binding.register(server, lambda method, handler: counted(method, policy.wrap(method, handler)))
    ports.put(server.add_insecure_port("127.0.0.1:0"))
    server.start()
    stop.wait()
    server.stop(0)


def _aio(ports: Queue[int], stop: Any) -> None:
    # The asyncio model: authentication in the coroutine, before the handler's work; a waiting
    # call would hold no thread. (The call policy's rich errors and metrics are not ported.)
    people = directory()

    class Servicer(policy_pb2_grpc.PolicyServiceServicer):
        async def GetPolicy(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            metadata = dict(context.invocation_metadata() or ())
            people.authenticate(str(metadata.get("authorization", "")) or None)
            return policy_pb2.GetPolicyResponse()

    async def main() -> None:
        server = grpc.aio.server()
        policy_pb2_grpc.add_PolicyServiceServicer_to_server(Servicer(), server)  # type: ignore[abstract, no-untyped-call]  # one method is enough
        ports.put(server.add_insecure_port("127.0.0.1:0"))
        await server.start()
        while not stop.is_set():
            await asyncio.sleep(0.05)
        await server.stop(0)

    asyncio.run(main())


def _round(port: int, pid: int) -> tuple[float, float]:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = policy_pb2_grpc.PolicyServiceStub(channel)
    metadata: tuple[tuple[str, str | bytes], ...] = (("authorization", "Bearer reader-token"),)
    stub.GetPolicy(policy_pb2.GetPolicyRequest(), metadata=metadata)
    per = CALLS // CALLERS

    def caller() -> None:
        for _ in range(per):
            stub.GetPolicy(policy_pb2.GetPolicyRequest(), metadata=metadata)

    cpu_before = _cpu(pid)
    started = time.perf_counter()
    threads = [threading.Thread(target=caller) for _ in range(CALLERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    cpu = _cpu(pid) - cpu_before
    channel.close()
    calls = per * CALLERS
    return elapsed / calls * 1e6, cpu / calls * 1e6


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _measure(target: Callable[..., None], *args: object) -> dict[str, float]:
    ports: Queue[int] = Queue()
    stop = Event()
    process = Process(target=target, args=(*args, ports, stop))
    process.start()
    try:
        port = ports.get(timeout=30)
        assert process.pid is not None
        rounds = [_round(port, process.pid) for _ in range(ROUNDS)]
    finally:
        stop.set()
        process.join(10)
    return {
        "wall_us_per_call": round(statistics.median(r[0] for r in rounds), 1),
        "server_cpu_us_per_call": round(statistics.median(r[1] for r in rounds), 1),
    }


def gate_alone(calls: int = 20000) -> float:
    """Microseconds of one ``intercept_service`` for an authenticated, admitted call."""
    pool = CountingPool(2, "gate")
    gate = Gate(
        directory(),
        {"/m": ANY_ROLE},
        pool,
        max_calls=64,
        retry_after_ms=250,
        certificate_clients=False,
    )

    class Details:
        method = "/m"
        invocation_metadata = (("authorization", "Bearer reader-token"),)

    details: Any = Details()
    handler: Any = object()
    started = time.perf_counter()
    for _ in range(calls):
        gate.intercept_service(lambda _d: handler, details)
    elapsed = time.perf_counter() - started
    gate.close()
    pool.shutdown()
    return round(elapsed / calls * 1e6, 2)


def main() -> None:
    figures = {
        "calls_per_round": CALLS,
        "callers": CALLERS,
        "gate_intercept_us": gate_alone(),
        "sync_before_gate": _measure(_sync, "before"),
        "sync_with_gate": _measure(_sync, "gate"),
        "asyncio": _measure(_aio),
    }
    json.dump(figures, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
