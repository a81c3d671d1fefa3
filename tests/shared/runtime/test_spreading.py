"""Traffic between replicas: calls spread over every address a target names, idempotent reads are
retried on UNAVAILABLE and writes are not, and servers make clients reconnect after a maximum
connection age (shared.runtime.transport). Real servers on loopback, each hosting the policy
service's contract with scripted answers, so the test sees which server served each attempt."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import pytest
from google.api import annotations_pb2

from forge.continuity.v1 import policy_pb2, policy_pb2_grpc
from shared.contract.channels import open_channel
from shared.contract.method_facts import IDEMPOTENT_READS
from shared.contract.modules import SERVICES
from shared.runtime.auth import ANY_ROLE
from shared.runtime.config import Settings, TransportSettings, transport_settings
from shared.runtime.errors import ResourceExhausted, Unavailable
from shared.runtime.metrics import RPC_HANDLED
from shared.runtime.server import RunningServer, service_binding, start_server
from shared.runtime.transport import resolvable
from tests.support import directory

POLICY = policy_pb2.DESCRIPTOR.services_by_name["PolicyService"]
RESPONSES = {
    "GetPolicy": policy_pb2.GetPolicyResponse,
    "PutPolicy": policy_pb2.PutPolicyResponse,
    "ListPolicyRevisions": policy_pb2.ListPolicyRevisionsResponse,
}


class Attempts:
    """Every attempt any scripted server saw: (server, method, client address)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seen: list[tuple[str, str, str]] = []

    def record(self, server: str, method: str, peer: str) -> int:
        with self._lock:
            self.seen.append((server, method, peer))
            return sum(1 for s, m, _ in self.seen if s == server and m == method)

    def of(self, method: str) -> list[tuple[str, str, str]]:
        with self._lock:
            return [attempt for attempt in self.seen if attempt[1] == method]


@contextmanager
def scripted_server(
    name: str,
    attempts: Attempts,
    unavailable: Callable[[str, int], bool] = lambda _method, _n: False,
    transport: TransportSettings | None = None,
) -> Iterator[RunningServer]:
    """A real server for the policy contract; ``unavailable(method, nth attempt)`` says when an
    attempt fails UNAVAILABLE (before any response, as a server that is going away does)."""

    def behaviour_of(method: str) -> Callable[[Any, grpc.ServicerContext], Any]:
        def answer(_request: Any, context: grpc.ServicerContext) -> Any:
            nth = attempts.record(name, method, context.peer())
            if unavailable(method, nth):
                raise Unavailable("SERVICE_UNAVAILABLE", f"{name} is going away")
            return RESPONSES[method]()

        return answer

    binding = service_binding(POLICY, dict.fromkeys(RESPONSES, ANY_ROLE), behaviour_of)
    settings = Settings(
        service="ledger",
        host="127.0.0.1",
        port=0,
        transport=transport or TransportSettings(),
    )
    running = start_server(settings, [binding], directory())
    try:
        yield running
    finally:
        running.stop(grace=0.5)


def _until(condition: Callable[[], bool], step: Callable[[], None], limit: int) -> bool:
    for _ in range(limit):
        if condition():
            return True
        step()
    return condition()


def test_calls_spread_over_every_address_of_the_target() -> None:
    attempts = Attempts()
    with (
        scripted_server("one", attempts) as one,
        scripted_server("two", attempts) as two,
    ):
        channel = open_channel(f"ipv4:127.0.0.1:{one.port},127.0.0.1:{two.port}", "reader-token")
        stub = policy_pb2_grpc.PolicyServiceStub(channel)
        try:
            spread = _until(
                lambda: {s for s, _, _ in attempts.of("GetPolicy")} == {"one", "two"},
                lambda: stub.GetPolicy(policy_pb2.GetPolicyRequest(), timeout=5),
                limit=200,
            )
        finally:
            channel.close()
    assert spread, f"every call went to one server: {attempts.of('GetPolicy')[:5]}"


def test_a_read_that_fails_unavailable_is_retried_and_a_write_is_not() -> None:
    attempts = Attempts()
    # Every server's first GetPolicy and every PutPolicy fail UNAVAILABLE.
    with scripted_server(
        "one", attempts, lambda method, nth: method == "PutPolicy" or nth == 1
    ) as one:
        channel = open_channel(f"127.0.0.1:{one.port}", "reader-token")
        stub = policy_pb2_grpc.PolicyServiceStub(channel)
        try:
            stub.GetPolicy(policy_pb2.GetPolicyRequest(), timeout=10)
            with pytest.raises(grpc.RpcError) as refused:
                stub.PutPolicy(policy_pb2.PutPolicyRequest(), timeout=10)
        finally:
            channel.close()
    assert len(attempts.of("GetPolicy")) == 2
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    assert len(attempts.of("PutPolicy")) == 1


def test_read_retries_can_be_turned_off() -> None:
    attempts = Attempts()
    with scripted_server("one", attempts, lambda _method, nth: nth == 1) as one:
        channel = open_channel(
            f"127.0.0.1:{one.port}",
            "reader-token",
            transport=TransportSettings(read_retry_attempts=1),
        )
        try:
            with pytest.raises(grpc.RpcError) as refused:
                policy_pb2_grpc.PolicyServiceStub(channel).GetPolicy(
                    policy_pb2.GetPolicyRequest(), timeout=10
                )
        finally:
            channel.close()
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    assert len(attempts.of("GetPolicy")) == 1


def test_a_server_makes_its_clients_reconnect_after_the_maximum_connection_age() -> None:
    attempts = Attempts()
    aged = TransportSettings(max_connection_age_ms=300, max_connection_age_grace_ms=300)
    with scripted_server("one", attempts, transport=aged) as one:
        channel = open_channel(f"127.0.0.1:{one.port}", "reader-token")
        stub = policy_pb2_grpc.PolicyServiceStub(channel)

        def call() -> None:
            stub.GetPolicy(policy_pb2.GetPolicyRequest(), timeout=5)
            time.sleep(0.1)

        try:
            call()
            first_connection = attempts.of("GetPolicy")[0][2]
            reconnected = _until(
                lambda: any(peer != first_connection for *_, peer in attempts.of("GetPolicy")),
                call,
                limit=100,
            )
        finally:
            channel.close()
    assert reconnected, f"every call stayed on the client connection {first_connection}"


def _http_verb(method: Any) -> str:
    rule = method.GetOptions().Extensions[annotations_pb2.http]
    return rule.WhichOneof("pattern") or ""


def test_the_retried_reads_are_real_rpcs_that_include_every_get_route_and_no_write() -> None:
    # (A POST route may still be a read: GetRejectedBoundaryCandidate posts its input.)
    retried = {(s, m) for s, methods in IDEMPOTENT_READS.items() for m in methods}
    for service_name, method_name in retried:
        assert method_name in SERVICES[service_name].methods_by_name, (service_name, method_name)
    for descriptor in SERVICES.values():
        for method in descriptor.methods:
            if _http_verb(method) == "get":
                assert (descriptor.name, method.name) in retried, method.full_name
    for write in [
        ("LedgerService", "CommitAdmission"),
        ("LedgerService", "AppendJournalEntry"),
        ("LedgerService", "CreateRun"),
        ("ExecutionService", "ClaimExecutionRequest"),
        ("ExecutionService", "RecordCommand"),
        ("ReconciliationService", "VerifyReconciliation"),
        ("PolicyService", "PutPolicy"),
        ("AdmissionService", "RequestInvalidReadContinuity"),
    ]:
        assert write not in retried


def test_transport_settings_come_from_the_environment_and_are_checked() -> None:
    settings = transport_settings(
        {"FORGE_GRPC_MAX_CONNECTION_AGE_MS": "60000", "FORGE_GRPC_READ_RETRY_ATTEMPTS": "2"}
    )
    assert settings.max_connection_age_ms == 60_000
    assert settings.read_retry_attempts == 2
    assert settings.keepalive_time_ms == TransportSettings().keepalive_time_ms
    for bad in (
        {"FORGE_GRPC_READ_RETRY_ATTEMPTS": "9"},
        {"FORGE_GRPC_KEEPALIVE_TIME_MS": "soon"},
        # Pings more frequent than the servers accept would be answered with GOAWAY.
        {"FORGE_GRPC_KEEPALIVE_TIME_MS": "5000", "FORGE_GRPC_MIN_PING_INTERVAL_MS": "10000"},
    ):
        with pytest.raises(ValueError, match="FORGE_GRPC_"):
            transport_settings(bad)


def test_host_port_targets_are_resolved_by_dns_and_named_resolvers_are_kept() -> None:
    assert resolvable("ledger:50051") == "dns:///ledger:50051"
    assert resolvable("dns:///ledger:50051") == "dns:///ledger:50051"
    assert resolvable("ipv4:127.0.0.1:1,127.0.0.1:2") == "ipv4:127.0.0.1:1,127.0.0.1:2"


def test_retries_are_throttled_while_a_server_keeps_failing() -> None:
    attempts = Attempts()
    calls = 20
    with scripted_server("one", attempts, lambda _method, _nth: True) as one:
        channel = open_channel(f"127.0.0.1:{one.port}", "reader-token")
        stub = policy_pb2_grpc.PolicyServiceStub(channel)
        try:
            for _ in range(calls):
                with pytest.raises(grpc.RpcError):
                    stub.GetPolicy(policy_pb2.GetPolicyRequest(), timeout=10)
        finally:
            channel.close()
    # Unthrottled, each call would take all 3 attempts; with 10 tokens, retries stop once 5
    # failures have used half of them, and every later call is tried once.
    assert calls <= len(attempts.of("GetPolicy")) <= calls + 5


def test_a_read_refused_for_a_cap_is_not_retried() -> None:
    attempts = Attempts()

    def behaviour_of(method: str) -> Callable[[Any, grpc.ServicerContext], Any]:
        def answer(_request: Any, context: grpc.ServicerContext) -> Any:
            attempts.record("one", method, context.peer())
            raise ResourceExhausted("PENDING_TICKET_LIMIT", "full", metadata={"count": "1"})

        return answer

    binding = service_binding(POLICY, dict.fromkeys(RESPONSES, ANY_ROLE), behaviour_of)
    running = start_server(
        Settings(service="ledger", host="127.0.0.1", port=0), [binding], directory()
    )
    channel = open_channel(f"127.0.0.1:{running.port}", "reader-token")
    try:
        with pytest.raises(grpc.RpcError) as refused:
            policy_pb2_grpc.PolicyServiceStub(channel).GetPolicy(
                policy_pb2.GetPolicyRequest(), timeout=10
            )
    finally:
        channel.close()
        running.stop(grace=0)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
    assert len(attempts.of("GetPolicy")) == 1


def test_a_read_refused_server_busy_is_retried_after_the_pushback() -> None:
    attempts = Attempts()
    release = threading.Event()

    def behaviour_of(method: str) -> Callable[[Any, grpc.ServicerContext], Any]:
        def answer(_request: Any, context: grpc.ServicerContext) -> Any:
            attempts.record("one", method, context.peer())
            if method == "ListPolicyRevisions":
                release.wait(10)  # holds the server's one thread
            return RESPONSES[method]()

        return answer

    binding = service_binding(POLICY, dict.fromkeys(RESPONSES, ANY_ROLE), behaviour_of)
    settings = Settings(service="ledger", host="127.0.0.1", port=0, max_queued_calls=0)
    running = start_server(settings, [binding], directory(), max_workers=2)
    channel = open_channel(f"127.0.0.1:{running.port}", "reader-token")
    stub = policy_pb2_grpc.PolicyServiceStub(channel)
    busy = RPC_HANDLED.labels(
        "forge.continuity.v1.PolicyService", "GetPolicy", "RESOURCE_EXHAUSTED", "SERVER_BUSY"
    )
    before = busy._value.get()
    try:
        holders = [
            stub.ListPolicyRevisions.future(policy_pb2.ListPolicyRevisionsRequest(), timeout=20)
            for _ in range(2)
        ]
        assert _until(
            lambda: len(attempts.of("ListPolicyRevisions")) == 2, lambda: time.sleep(0.01), 500
        )
        # Refused SERVER_BUSY with a 250 ms pushback; the holders end before the retry.
        threading.Timer(0.1, release.set).start()
        stub.GetPolicy(policy_pb2.GetPolicyRequest(), timeout=10)
        for holder in holders:
            holder.result(timeout=10)
    finally:
        release.set()
        channel.close()
        running.stop(grace=0)
    assert busy._value.get() == before + 1
    assert len(attempts.of("GetPolicy")) == 1
