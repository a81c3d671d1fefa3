"""`make run`'s process: four real services and the HTTP gateway on loopback, health SERVING, one
ready line once everything serves, a second runner refused on its taken port, state changes
logged to stdout and the log file, clean stop on SIGTERM, and no orphan when the runner itself is
killed."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from forge.continuity.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from services.ledger.database import current_revision, make_engine, required_revision
from shared.contract.channels import open_channel
from tests.runner_process import ROOT, Output, free_ports, runner_env, running_runner

SERVICES = ("ledger", "reconstruction", "candidate", "admission")


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
def runner(
    tmp_path: Path,
) -> Iterator[tuple[subprocess.Popen[str], dict[str, int], Output]]:
    names = (*SERVICES, "gateway")
    ports = dict(zip(names, free_ports(5), strict=True))
    # Free metrics ports too: the defaults are fixed and another runner may hold them.
    metrics = dict(zip((f"{name}-metrics" for name in names), free_ports(5), strict=True))
    arguments = [f"--{name}-port={port}" for name, port in {**ports, **metrics}.items()]
    deadline = time.monotonic() + 90
    # Killed at the end, not stopped: the tests that stop it check that stop themselves.
    with running_runner(
        arguments, runner_env(tmp_path), startup_seconds=90, graceful_stop=False
    ) as (process, output):
        for name, port in ports.items():
            if name != "gateway":
                wait_serving(port, deadline)
        wait_http(ports["gateway"], deadline)
        yield process, {**ports, **metrics}, output


def test_four_services_serve_and_stop_cleanly_on_sigterm(
    runner: tuple[subprocess.Popen[str], dict[str, int], Output], tmp_path: Path
) -> None:
    process, ports, _output = runner
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
    runner: tuple[subprocess.Popen[str], dict[str, int], Output],
) -> None:
    process, _ports, _output = runner
    children = children_of(process.pid)
    assert len(children) == 5
    process.kill()
    process.wait()
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in children if alive(pid)] == []


def test_one_ready_line_with_every_url_after_everything_serves(
    runner: tuple[subprocess.Popen[str], dict[str, int], Output],
) -> None:
    _process, ports, output = runner
    ready = [line for line in output.lines if line.startswith("forge continuity ready:")]
    assert len(ready) == 1
    for name in SERVICES:
        assert f"{name} grpc://127.0.0.1:{ports[name]}" in ready[0]
    gateway = f"http://127.0.0.1:{ports['gateway']}"
    assert f"HTTP {gateway}/api/v1" in ready[0] and f"console {gateway}/console/" in ready[0]
    # Every process's metrics URL, and each answers with the Prometheus text format.
    for name in (*SERVICES, "gateway"):
        url = f"http://127.0.0.1:{ports[name + '-metrics']}/metrics"
        assert f"{name} {url}" in ready[0]
        with urllib.request.urlopen(url, timeout=10) as reply:
            assert b"# TYPE forge_" in reply.read()
    # The banner (the development tokens) comes when everything is up, not before.
    banner = output.lines.index(
        "local development tokens (use as 'authorization: Bearer <token>'):"
    )
    assert banner < output.lines.index(ready[0])
    serving = [i for i, line in enumerate(output.lines) if "admission SERVING" in line]
    assert serving and serving[0] < banner
    # The token table's columns line up: every role list starts at the same column.
    table = output.lines[banner + 1 : output.lines.index(ready[0])]
    assert table and all(line.startswith("  dev-") for line in table), table
    columns = {re.match(r"  \S+\s+\S+\s+", line).end() for line in table}  # type: ignore[union-attr]
    assert len(columns) == 1, table
    # The URL the ready line prints answers (an index), and `/` leads to the console.
    with urllib.request.urlopen(f"{gateway}/api/v1", timeout=10) as reply:  # noqa: S310 - loopback
        assert json.loads(reply.read())["links"]["console"] == "/console/"
    with urllib.request.urlopen(f"{gateway}/", timeout=10) as reply:  # noqa: S310 - loopback
        assert reply.url == f"{gateway}/console/"


def test_a_second_runner_says_the_port_is_in_use_and_exits(
    runner: tuple[subprocess.Popen[str], dict[str, int], Output], tmp_path: Path
) -> None:
    _process, ports, _output = runner
    arguments = [f"--{name}-port={port}" for name, port in ports.items()]
    second = subprocess.run(
        [sys.executable, "-m", "services.runner", *arguments],
        cwd=ROOT,
        env=runner_env(tmp_path / "second"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert second.returncode != 0
    assert f"port {ports['ledger']} is in use" in second.stderr
    # `make run` passes no flags: the advice is the variable, and the target others then need.
    assert "`FORGE_LEDGER_PORT=<free port> make run`" in second.stderr, second.stderr
    assert "FORGE_LEDGER_TARGET=127.0.0.1:<that port>" in second.stderr
    assert "--ledger-port" not in second.stderr
    assert "Traceback" not in second.stderr + second.stdout
    assert not (tmp_path / "second" / "principals.json").exists()  # nothing was started


def test_state_changes_are_logged_to_stdout_and_the_log_file(
    runner: tuple[subprocess.Popen[str], dict[str, int], Output], tmp_path: Path
) -> None:
    _process, ports, output = runner
    policy = policy_pb2_grpc.PolicyServiceStub(
        open_channel(f"127.0.0.1:{ports['ledger']}", "dev-admin-token")
    )
    policy.PutPolicy(
        policy_pb2.PutPolicyRequest(
            expected_revision=1,
            settings=common_pb2.PolicySettings(enabled=True, window_seconds=600),
        )
    )
    line = output.wait_for_event("event=policy_written actor=dev-admin", time.monotonic() + 30)
    assert "policy_revision=2" in line and line.endswith("outcome=enabled")
    logged = (tmp_path / "var" / "continuity.log").read_text(encoding="utf-8")
    assert [row for row in logged.splitlines() if line in row]
    # The HTTP requests made (the fixture polled /healthz) left no access line by default.
    assert '"GET /healthz' not in logged and "uvicorn.access" not in logged, logged
    # The readiness probes repeat every half second; the log keeps their changes only.
    assert logged.count("/healthz NOT_SERVING") <= 4, logged
    # Nor alembic's per-connection boilerplate (the readiness check asks for the revision often).
    assert "alembic" not in logged, logged
