"""`make run-mtls`: the runner with the `make certs` files, every service its own certificate and
client certificates required, the gateway on HTTPS; and each kind of caller over it with its TLS
settings: grpcurl (-cacert/-cert/-key), the operator CLI (--tls-*), the HTTP gateway, the
reference worker (FORGE_TLS_*) and the Node.js client built from the .proto files. Without a
certificate each is refused at the handshake."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

import pytest

from forge.continuity.v1 import ledger_pb2, ledger_pb2_grpc
from services.client.cli import main as cli
from shared.contract.channels import open_channel
from shared.runtime.config import ClientTls
from tests.polyglot import test_node_client
from tests.polyglot.test_grpcurl import grpcurl_executable
from tests.runner_process import ROOT, Output, free_ports, runner_env, running_runner

SERVICES = ("ledger", "reconstruction", "candidate", "admission")
STARTUP_SECONDS = 120
GET_POLICY = "forge.continuity.v1.PolicyService/GetPolicy"
#: The ``node`` fixture (Node.js with tools/node_modules), as the polyglot tests have it.
node_fixture = test_node_client.node


@dataclass(frozen=True)
class MtlsRun:
    ports: dict[str, int]
    certs: Path
    output: Output

    def target(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    @property
    def ca(self) -> str:
        return str(self.certs / "ca" / "ca.crt")

    def files(self, role: str) -> tuple[str, str]:
        return str(self.certs / role / "tls.crt"), str(self.certs / role / "tls.key")

    def tls_env(self, role: str) -> dict[str, str]:
        cert, key = self.files(role)
        return {"FORGE_TLS_CA": self.ca, "FORGE_TLS_CERT": cert, "FORGE_TLS_KEY": key}

    def targets_env(self) -> dict[str, str]:
        return {
            f"FORGE_{name.upper()}_TARGET": self.target(name)
            for name in ("ledger", "candidate", "admission")
        }


@pytest.fixture(scope="module")
def mtls_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MtlsRun]:
    workdir = tmp_path_factory.mktemp("mtls-run")
    certs = workdir / "certs"
    names = (*SERVICES, "gateway")
    ports = dict(zip(names, free_ports(5), strict=True))
    arguments = [f"--{name}-port={port}" for name, port in ports.items()]
    arguments += [f"--{name}-metrics-port=0" for name in names]
    with running_runner(
        ["--certs", str(certs), *arguments], runner_env(workdir), startup_seconds=STARTUP_SECONDS
    ) as (_process, output):
        yield MtlsRun(ports, certs, output)


def test_the_runner_says_every_address_speaks_tls(mtls_run: MtlsRun) -> None:
    ready = mtls_run.output.wait_for("forge continuity ready:", time.monotonic() + 1)
    assert f"ledger grpcs://127.0.0.1:{mtls_run.ports['ledger']}" in ready
    assert f"HTTP https://127.0.0.1:{mtls_run.ports['gateway']}/api/v1" in ready
    assert any(f"FORGE_TLS_CA={mtls_run.ca}" in line for line in mtls_run.output.lines)


def grpcurl(mtls_run: MtlsRun, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [
        str(grpcurl_executable()),
        "-max-time",
        "10",
        *flags,
        "-H",
        "authorization: Bearer dev-reader-token",
        mtls_run.target("ledger"),
        GET_POLICY,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)


def test_grpcurl_with_its_certificate_is_served_and_without_one_is_refused(
    mtls_run: MtlsRun,
) -> None:
    cert, key = mtls_run.files("operator")
    served = grpcurl(mtls_run, "-cacert", mtls_run.ca, "-cert", cert, "-key", key)
    assert served.returncode == 0, served.stderr
    assert json.loads(served.stdout)["policy"]["revision"] == "1"
    for flags in (("-cacert", mtls_run.ca), ("-plaintext",)):
        refused = grpcurl(mtls_run, *flags)
        # Not an RPC status (exit 64 + code): the connection itself failed.
        assert refused.returncode == 1, (flags, refused.stdout, refused.stderr)
        assert "Failed to dial target host" in refused.stderr, refused.stderr


def run_cli(
    mtls_run: MtlsRun, *arguments: str, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        env = {**mtls_run.targets_env(), "FORGE_TOKEN": "dev-reader-token", **(env or {})}
        code = cli(["--json", *arguments], env)
    finally:
        sys.stdout, sys.stderr = saved
    return code, out.getvalue(), err.getvalue()


def test_the_cli_with_tls_flags_is_served_and_without_them_cannot_connect(
    mtls_run: MtlsRun,
) -> None:
    cert, key = mtls_run.files("operator")
    tls = ["--tls-ca", mtls_run.ca, "--tls-cert", cert, "--tls-key", key]
    code, out, err = run_cli(mtls_run, *tls, "policy", "show")
    assert code == 0, err
    assert json.loads(out)["policy"]["revision"] == "1"
    # The same from the environment.
    code, out, err = run_cli(mtls_run, "policy", "show", env=mtls_run.tls_env("operator"))
    assert code == 0, err
    assert json.loads(out)["policy"]["revision"] == "1"
    code, _out, err = run_cli(mtls_run, "--tls-ca", mtls_run.ca, "policy", "show")
    assert code == 1
    assert json.loads(err)["error"]["reason"] == "SERVICE_UNREACHABLE"
    code, _out, err = run_cli(mtls_run, "--tls-cert", cert, "policy", "show")
    assert code == 2 and "needs its key" in err


def test_the_gateway_serves_https_and_reaches_the_services_over_mutual_tls(
    mtls_run: MtlsRun,
) -> None:
    gateway = mtls_run.ports["gateway"]
    request = urllib.request.Request(
        f"https://127.0.0.1:{gateway}/api/v1/invalid-read-continuity/policy",
        headers={"authorization": "Bearer dev-reader-token"},
    )
    context = ssl.create_default_context(cafile=mtls_run.ca)
    with urllib.request.urlopen(request, timeout=30, context=context) as reply:  # noqa: S310
        assert json.loads(reply.read())["policy"]["revision"] == "1"
    # Cleartext HTTP to the TLS listener carries no token anywhere.
    plain = f"http://127.0.0.1:{gateway}/api/v1/invalid-read-continuity/policy"
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(plain, timeout=10)


def run_worker(mtls_run: MtlsRun, tmp_path: Path, tls: dict[str, str]) -> tuple[int, str]:
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("FORGE_", "OTEL_"))
    }
    env.update(
        PYTHONPATH=f"{ROOT}:{ROOT / 'shared' / 'gen'}",
        FORGE_LEDGER_TARGET=mtls_run.target("ledger"),
        FORGE_WORKER_TOKEN="dev-worker-token",
        FORGE_WORKER_PROVIDER_URL="http://127.0.0.1:9/v1",  # never reached: nothing to run
        FORGE_WORKER_PROVIDER_KEY="unused",
        FORGE_WORKER_SOURCE_DIR=str(tmp_path),
        **tls,
    )
    done = subprocess.run(
        [sys.executable, "-m", "services.worker", "--all-runs"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def test_the_worker_with_its_certificate_asks_the_ledger_and_without_one_is_refused(
    mtls_run: MtlsRun, tmp_path: Path
) -> None:
    code, said = run_worker(mtls_run, tmp_path, mtls_run.tls_env("worker"))
    # The ledger answered: nothing queued, and no refusal.
    assert code == 3, said
    assert "nothing to run" in said and "refusal" not in said, said
    code, said = run_worker(mtls_run, tmp_path, {"FORGE_TLS_CA": mtls_run.ca})
    # Nothing ran either, but because the ledger could not be reached.
    assert "last refusal ListAllExecutionRequests: UNAVAILABLE" in said, said


def run_node(executable: str, mtls_run: MtlsRun, env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [
            executable,
            str(test_node_client.CLIENT),
            mtls_run.target("ledger"),
            "run-node-tls",
            "dev-reader-token",
        ],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"node client failed:\n{done.stdout}{done.stderr}"
    report: dict[str, object] = json.loads(done.stdout)
    return report


def test_the_node_client_over_mutual_tls(node_fixture: str, mtls_run: MtlsRun) -> None:
    writer = ClientTls(mtls_run.ca, *mtls_run.files("writer"))
    with open_channel(mtls_run.target("ledger"), "dev-writer-token", tls=writer) as channel:
        ledger_pb2_grpc.LedgerServiceStub(channel).CreateRun(
            ledger_pb2.CreateRunRequest(
                run_id="run-node-tls",
                task_id="task-node-tls",
                attempt_id="attempt-node-tls",
                source_revision="rev-node-tls",
                configuration_digest="sha256:" + "c" * 64,
                provider_timeout_seconds=900,
                command_limit=22,
                time_budget_protocol="provider-timeout-v1",
                source_profile="profile-node-tls",
            ),
            timeout=30,
        )
    report = run_node(node_fixture, mtls_run, mtls_run.tls_env("operator"))
    assert report["health"] == {
        "": {"response": {"status": "SERVING"}},
        "forge.continuity.v1.LedgerService": {"response": {"status": "SERVING"}},
        "forge.continuity.v1.PolicyService": {"response": {"status": "SERVING"}},
    }
    assert report["get_run"]["response"]["run"]["task_id"] == "task-node-tls"  # type: ignore[index]
    denied = report["put_policy_as_reader"]["error"]  # type: ignore[index]
    assert denied["status"]["details"][0]["reason"] == "ROLE_REQUIRED"
    # Without its certificate: every call fails at the handshake, UNAVAILABLE, no status details.
    refused = run_node(node_fixture, mtls_run, {"FORGE_TLS_CA": mtls_run.ca})
    assert refused["get_run"]["error"]["code_name"] == "UNAVAILABLE"  # type: ignore[index]
    assert "status" not in refused["get_run"]["error"]  # type: ignore[index]
