"""A Node.js client built only from the .proto files (@grpc/grpc-js + @grpc/proto-loader) against
the real ledger process: health, bearer-token reads, and rich refusals decoded from the
``grpc-status-details-bin`` trailer."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.polyglot.process import REPO_ROOT, LedgerProcess

CLIENT = Path(__file__).resolve().parent / "node" / "client.js"
TOOLS = REPO_ROOT / "tools"
NODE_PACKAGES = ("@grpc/grpc-js", "@grpc/proto-loader")


def _missing_packages() -> list[str]:
    return [
        name
        for name in NODE_PACKAGES
        if not (TOOLS / "node_modules" / name / "package.json").is_file()
    ]


@pytest.fixture(scope="session")
def node() -> str:
    """The node executable, with tools/node_modules installed (``npm install`` if missing)."""
    executable = shutil.which("node")
    if executable is None:
        pytest.fail("node is not on PATH: the polyglot tests need Node.js (20 or later)")
    if _missing_packages():
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail(f"tools/node_modules lacks {_missing_packages()} and npm is not on PATH")
        installed = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund"],
            cwd=TOOLS,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if installed.returncode != 0 or _missing_packages():
            pytest.fail(
                f"`npm install` in tools/ failed ({installed.returncode}):\n"
                f"{installed.stdout}{installed.stderr}"
            )
    return executable


def run_client(node: str, served: LedgerProcess, run_id: str) -> dict[str, Any]:
    result = subprocess.run(
        [node, str(CLIENT), served.target, run_id, "reader-token"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"node client failed:\n{result.stdout}{result.stderr}"
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_node_client_built_from_protos_reads_and_decodes_refusals(
    node: str, ledger_process: LedgerProcess
) -> None:
    """One client run (one ledger process): health and reads first, then the refusals."""
    created = ledger_process.create_run("run-node")

    report = run_client(node, ledger_process, "run-node")

    assert report["health"] == {
        "": {"response": {"status": "SERVING"}},
        "forge.continuity.v1.LedgerService": {"response": {"status": "SERVING"}},
        "forge.continuity.v1.PolicyService": {"response": {"status": "SERVING"}},
    }

    answer = report["get_run"]["response"]
    run = answer["run"]
    assert run["run_id"] == "run-node"
    assert run["task_id"] == "task-polyglot"
    assert run["attempt_id"] == "attempt-polyglot"
    assert run["command_limit"] == "22"  # int64 as a decimal string (longs: String)
    assert run["provider_timeout_seconds"] == "900"
    assert run["time_budget_protocol"] == "provider-timeout-v1"
    assert run["created_by"] == "paul-writer"
    assert run["run_digest"] == created.run_digest
    assert run["created_at"]["seconds"] == str(created.created_at.seconds)
    assert answer["head"]["sequence"] == "0"

    policy = report["get_policy"]["response"]["policy"]
    assert policy["revision"] == "1"
    assert policy["enabled"] is False
    assert policy["per_run_ticket_limit"] == "50"
    assert policy["pending_ticket_limit"] == "500"
    assert policy["updated_by"] == "system"

    # PutPolicy as a reader: PERMISSION_DENIED, with the ErrorInfo decoded from the
    # grpc-status-details-bin trailer by protobufjs.
    denied = report["put_policy_as_reader"]["error"]
    assert denied["code"] == 7
    assert denied["code_name"] == "PERMISSION_DENIED"
    status = denied["status"]
    assert status["code"] == 7
    [info] = status["details"]
    assert info["type_url"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert info["reason"] == "ROLE_REQUIRED"
    assert info["domain"] == "continuity.forge"
    assert info["metadata"]["identity"] == "rita-reader"
    assert info["metadata"]["method"] == "/forge.continuity.v1.PolicyService/PutPolicy"
    assert info["metadata"]["required_roles"] == "factory_administrator"

    missing = report["get_policy_without_token"]["error"]
    assert missing["code"] == 16
    assert missing["code_name"] == "UNAUTHENTICATED"
    [info] = missing["status"]["details"]
    assert info["reason"] == "CREDENTIALS_MISSING"
    assert info["domain"] == "continuity.forge"
