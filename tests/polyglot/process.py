"""The real ledger process, as an operator starts it, for the polyglot clients (grpcurl, Node.js).

:func:`running_ledger` runs ``python -m services.ledger`` as a subprocess on a free loopback port,
waits until ``grpc.health.v1`` answers SERVING, and afterwards sends SIGTERM and requires a clean
exit (code 0) within 15 seconds: graceful shutdown is part of what these tests prove.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from forge.continuity.v1 import ledger_pb2, ledger_pb2_grpc
from shared.contract.channels import open_channel
from shared.runtime.bootstrap import STACKS_SIGNAL
from shared.runtime.readiness import LIVENESS
from tests.support import principals_document

REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 30.0
SHUTDOWN_SECONDS = 15.0
# How long a stuck process gets to write its threads' stacks before it is killed.
STACKS_SECONDS = 1.0
# The services the ledger process hosts (besides health and reflection).
LEDGER_PROCESS_SERVICES = (
    "forge.continuity.v1.LedgerService",
    "forge.continuity.v1.PolicyService",
    "forge.continuity.v1.ExecutionService",
    "forge.continuity.v1.ReconciliationService",
)


@dataclass(frozen=True)
class LedgerProcess:
    """A running ``python -m services.ledger`` and how to reach it."""

    process: subprocess.Popen[bytes]
    target: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def channel(self, token: str = "") -> grpc.Channel:
        return open_channel(self.target, token)

    def create_run(self, run_id: str, token: str = "writer-token") -> ledger_pb2.Run:
        """Registers a run through the Python stub (platform writer) and returns it."""
        with self.channel(token) as channel:
            response = ledger_pb2_grpc.LedgerServiceStub(channel).CreateRun(
                ledger_pb2.CreateRunRequest(
                    run_id=run_id,
                    task_id="task-polyglot",
                    attempt_id="attempt-polyglot",
                    source_revision="rev-polyglot",
                    configuration_digest="sha256:" + "c" * 64,
                    provider_timeout_seconds=900,
                    command_limit=22,
                    time_budget_protocol="provider-timeout-v1",
                    source_profile="profile-polyglot",
                ),
                timeout=10,
            )
        assert response.created
        return response.run


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _child_environment() -> dict[str, str]:
    """The caller's environment without any FORGE_* / OTEL_* setting that could leak into the
    service (TLS, ports, exporters), plus the import path and bind address the service needs."""
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("FORGE_", "OTEL_"))
    }
    paths = [str(REPO_ROOT), str(REPO_ROOT / "shared" / "gen")]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    env.update(
        PYTHONPATH=os.pathsep.join(paths),
        PYTHONDONTWRITEBYTECODE="1",
        FORGE_HOST="127.0.0.1",
        FORGE_LOG_LEVEL="INFO",
    )
    return env


def health_status(target: str, service: str = "") -> int | None:
    """The health status ``target`` reports for ``service``; None when it does not answer."""
    with grpc.insecure_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=1
            )
        except grpc.RpcError:
            return None
    return int(reply.status)


def _serving(target: str, services: Sequence[str] = ("", *LEDGER_PROCESS_SERVICES)) -> bool:
    """True when every one of ``services`` ("" is the server as a whole) reports SERVING."""
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            for service in services:
                status = stub.Check(
                    health_pb2.HealthCheckRequest(service=service), timeout=1
                ).status
                if status != health_pb2.HealthCheckResponse.SERVING:
                    return False
        except grpc.RpcError:
            return False
    return True


def terminate(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process, as an operator or Kubernetes stops it."""
    process.send_signal(signal.SIGTERM)


@contextmanager
def running_ledger(
    database_url: str,
    workdir: Path,
    *,
    serving: bool = True,
    env: Mapping[str, str] | None = None,
    send_stop: Callable[[subprocess.Popen[bytes]], None] = terminate,
) -> Iterator[LedgerProcess]:
    """``python -m services.ledger`` on ``database_url`` (already migrated, unless ``serving``
    is False: then it only waits for the process to answer its liveness health check), with the
    test principals, its log and principals file in ``workdir`` and ``env`` added to its
    environment; stopped with SIGTERM on exit."""
    principals = workdir / "principals.json"
    principals.write_text(json.dumps(principals_document()), encoding="utf-8")
    log_path = workdir / "ledger.log"
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "services.ledger",
        "--port",
        str(port),
        "--database-url",
        database_url,
        "--principals-file",
        str(principals),
    ]
    with log_path.open("wb") as log_file:
        # cwd is a scratch directory: the service must not depend on being started from the
        # repository root (migrations, principals and database come from the flags).
        process = subprocess.Popen(
            command,
            cwd=workdir,
            env={**_child_environment(), **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    running = LedgerProcess(process, f"127.0.0.1:{port}", log_path)
    try:
        _wait_until_serving(running, ("", *LEDGER_PROCESS_SERVICES) if serving else (LIVENESS,))
    except BaseException:
        if process.poll() is None:
            process.kill()
            process.wait()
        raise
    try:
        yield running
    finally:
        _stop(running, send_stop)


def _wait_until_serving(running: LedgerProcess, services: Sequence[str]) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while not _serving(running.target, services):
        if running.process.poll() is not None:
            pytest.fail(
                f"ledger exited with {running.process.returncode} before serving:\n{running.log()}"
            )
        if time.monotonic() > deadline:
            pytest.fail(f"ledger not SERVING within {STARTUP_SECONDS:.0f}s:\n{running.log()}")
        time.sleep(0.1)


def _stop(
    running: LedgerProcess,
    send_stop: Callable[[subprocess.Popen[bytes]], None],
) -> None:
    """Send the stop signal, then require exit code 0 within SHUTDOWN_SECONDS; otherwise ask for
    every thread's stack (shared.runtime.bootstrap.STACKS_SIGNAL, into the log), kill and fail."""
    process = running.process
    if process.poll() is not None:
        pytest.fail(
            f"ledger died during the test with exit code {process.returncode}:\n{running.log()}"
        )
    send_stop(process)
    started = time.monotonic()
    try:
        code = process.wait(timeout=SHUTDOWN_SECONDS)
    except subprocess.TimeoutExpired:
        process.send_signal(STACKS_SIGNAL)
        time.sleep(STACKS_SECONDS)
        process.kill()
        process.wait()
        pytest.fail(
            f"ledger did not stop within {SHUTDOWN_SECONDS:.0f}s of SIGTERM (its threads' stacks "
            f"at the end of the log):\n{running.log()}"
        )
    elapsed = time.monotonic() - started
    assert code == 0, f"ledger exited with {code} after SIGTERM ({elapsed:.1f}s):\n{running.log()}"
