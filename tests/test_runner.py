"""`make run`'s process: four real services and the HTTP gateway on loopback, health SERVING, clean
stop on SIGTERM, and no orphan when the runner itself is killed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from forge.continuity.v1 import policy_pb2, policy_pb2_grpc
from services.ledger.database import current_revision, make_engine, required_revision
from shared.runtime.client import open_channel

ROOT = Path(__file__).resolve().parents[1]
SERVICES = ("ledger", "reconstruction", "candidate", "admission")


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def children_of(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def wait_serving(port: int, deadline: float) -> None:
    while True:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=1
            )
            if reply.status == health_pb2.HealthCheckResponse.SERVING:
                return
        except grpc.RpcError:
            pass
        finally:
            channel.close()
        if time.monotonic() > deadline:
            raise AssertionError(f"port {port} never became SERVING")
        time.sleep(0.3)


def wait_http(port: int, deadline: float) -> None:
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"the gateway on port {port} never answered /healthz")
        time.sleep(0.3)


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, int]]]:
    ports = dict(zip((*SERVICES, "gateway"), free_ports(5), strict=True))
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}:{ROOT / 'shared' / 'gen'}",
        "FORGE_DATABASE_URL": f"sqlite:///{tmp_path}/continuity.db",
        "FORGE_PRINCIPALS_FILE": str(tmp_path / "principals.json"),
        "FORGE_SIGNING_KEY_FILE": str(tmp_path / "signing-key.pem"),
    }
    arguments = [f"--{name}-port={port}" for name, port in ports.items()]
    process = subprocess.Popen(
        [sys.executable, "-m", "services.runner", *arguments], cwd=ROOT, env=env
    )
    try:
        deadline = time.monotonic() + 90
        for name, port in ports.items():
            if name != "gateway":
                wait_serving(port, deadline)
        wait_http(ports["gateway"], deadline)
        yield process, ports
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_four_services_serve_and_stop_cleanly_on_sigterm(
    runner: tuple[subprocess.Popen[bytes], dict[str, int]], tmp_path: Path
) -> None:
    process, ports = runner
    children = children_of(process.pid)
    assert len(children) == 5
    assert (tmp_path / "principals.json").exists() and (tmp_path / "continuity.db").exists()
    # the development head-signing key the ledger signs with (ADR 0015), owner-only
    assert (tmp_path / "signing-key.pem").stat().st_mode & 0o077 == 0
    for name in SERVICES:
        port = ports[name]
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        service = {
            "ledger": "forge.continuity.v1.LedgerService",
            "reconstruction": "forge.continuity.v1.ReconstructionService",
            "candidate": "forge.continuity.v1.CandidateService",
            "admission": "forge.continuity.v1.AdmissionService",
        }[name]
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=5
        )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        channel.close()
    policy = policy_pb2_grpc.PolicyServiceStub(
        open_channel(f"127.0.0.1:{ports['ledger']}", "dev-reader-token")
    )
    assert policy.GetPolicy(policy_pb2.GetPolicyRequest()).policy.revision == 1
    # The ledger never migrates by itself: the runner migrated the fresh database first.
    engine = make_engine(f"sqlite:///{tmp_path}/continuity.db")
    try:
        assert current_revision(engine) == required_revision()
    finally:
        engine.dispose()
    # The gateway answers the spec's HTTP route through the ledger it was pointed at.
    request = urllib.request.Request(
        f"http://127.0.0.1:{ports['gateway']}/api/v1/invalid-read-continuity/policy",
        headers={"authorization": "Bearer dev-reader-token"},
    )
    with urllib.request.urlopen(request, timeout=10) as reply:  # noqa: S310 - a loopback URL
        assert json.load(reply)["policy"]["revision"] == "1"

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    assert [pid for pid in children if alive(pid)] == []


def test_killing_the_runner_leaves_no_orphan(
    runner: tuple[subprocess.Popen[bytes], dict[str, int]],
) -> None:
    process, _ports = runner
    children = children_of(process.pid)
    assert len(children) == 5
    process.kill()
    process.wait()
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in children if alive(pid)] == []
