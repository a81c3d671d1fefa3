"""The v1 admission story by curl, end to end, against the gateway and the four real services; and
the gateway guide's curl commands name real routes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from services.gateway.routes import Match, RouteTable, contract_routes
from tests.gateway.conftest import V1_ACKNOWLEDGEMENTS, RunningGateway, seed

ROOT = Path(__file__).resolve().parents[2]
GATEWAY_GUIDE = ROOT / "docs" / "guide" / "http.md"


def curl_executable() -> str:
    path = shutil.which("curl")
    if path is None:
        pytest.fail("curl is not installed (apt-get install curl; .ci/run installs it)")
    return path


def curl(
    gateway: RunningGateway,
    method: str,
    path: str,
    *,
    token: str,
    data: dict[str, Any] | None = None,
) -> tuple[int, Any]:
    """``curl -sS -X METHOD -H authorization [-d JSON] URL``: (HTTP status, parsed body)."""
    command = [curl_executable(), "-sS", "-X", method, "-w", "\n%{http_code}"]
    command += ["-H", f"authorization: Bearer {token}"]
    if data is not None:
        command += ["-H", "content-type: application/json", "-d", json.dumps(data)]
    command.append(gateway.url + path)
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    body, _, status = result.stdout.rpartition("\n")
    return int(status), json.loads(body) if body.strip().startswith(("{", "[")) else body


def ok(reply: tuple[int, Any]) -> Any:
    status, body = reply
    assert status == 200, body
    return body


def test_the_v1_admission_story_by_curl(gateway: RunningGateway) -> None:
    seed(gateway, "run-held-1")  # what workers and the engine would have written
    run = ok(curl(gateway, "GET", "/api/v1/runs/run-held-1", token="reader-token"))["run"]
    policy = ok(curl(gateway, "GET", "/api/v1/invalid-read-continuity/policy", token="admin-token"))
    put = ok(
        curl(
            gateway,
            "PUT",
            "/api/v1/invalid-read-continuity/policy",
            token="admin-token",
            data={
                "expected_revision": policy["policy"]["revision"],
                "settings": {"enabled": True, "window_seconds": "3600"},
            },
        )
    )
    assert put["policy"]["enabled"] is True

    candidate = ok(
        curl(
            gateway,
            "GET",
            "/api/v1/runs/run-held-1/invalid-read-continuity/candidate",
            token="operator-token",
        )
    )["candidate"]
    assert candidate["eligible"] is True and candidate["holds"] == []
    submission = {
        "digests": candidate["digests"],
        "version": 1,
        "valid_for_seconds": 1800,
        **V1_ACKNOWLEDGEMENTS,
    }
    request_path = "/api/v1/runs/run-held-1/invalid-read-continuity/requests/req-1"
    before = gateway.rows()
    first = ok(curl(gateway, "POST", request_path, token="operator-token", data=submission))
    assert first["created"] is True
    ticket = first["ticket"]
    assert ticket["execution_request"]["state"] == "EXECUTION_REQUEST_STATE_QUEUED"
    after = gateway.rows()
    assert after != before

    # The response is "lost": read it back, then resubmit identically.
    assert ok(curl(gateway, "GET", request_path, token="reader-token"))["ticket"] == ticket
    again = ok(curl(gateway, "POST", request_path, token="operator-token", data=submission))
    assert again == {"created": False, "ticket": ticket}
    assert gateway.rows() == after, "an identical resubmission wrote something"
    status, body = curl(
        gateway, "POST", request_path, token="operator-token", data={**submission, "version": 2}
    )
    assert status == 400 and body["code"] == 3

    exr = ticket["execution_request"]["execution_request_id"]
    claim = {key: run[key] for key in ("source_revision", "configuration_digest", "source_profile")}
    claimed = ok(
        curl(
            gateway,
            "POST",
            f"/api/v1/execution-requests/{exr}:claim",
            token="worker-token",
            data={**claim, "attempt_id": run["attempt_id"]},
        )
    )["execution_request"]
    generation = claimed["lease"]["generation"]
    assert claimed["state"] == "EXECUTION_REQUEST_STATE_CLAIMED"
    for number in range(12, 23):
        receipt = ok(
            curl(
                gateway,
                "POST",
                f"/api/v1/execution-requests/{exr}/commands/cmd-{number}",
                token="worker-token",
                data={"lease_generation": generation, "command_digest": "sha256:" + "b" * 64},
            )
        )
        assert receipt["usage"]["used"] == str(number)
    status, body = curl(
        gateway,
        "POST",
        f"/api/v1/execution-requests/{exr}/commands/cmd-23",
        token="worker-token",
        data={"lease_generation": generation, "command_digest": "sha256:" + "b" * 64},
    )
    assert status == 429 and "COMMAND_LIMIT_REACHED" in json.dumps(body)
    usage = ok(curl(gateway, "GET", "/api/v1/runs/run-held-1/command-usage", token="worker-token"))
    assert usage["usage"]["used"] == usage["usage"]["limit"] == "22"
    ok(
        curl(
            gateway,
            "POST",
            f"/api/v1/execution-requests/{exr}:complete",
            token="worker-token",
            data={"lease_generation": generation},
        )
    )
    verified = ok(
        curl(gateway, "GET", "/api/v1/runs/run-held-1/journal:verify", token="reader-token")
    )
    assert verified["valid"] is True


def guide_curl_commands() -> list[str]:
    """The curl commands of the gateway guide (once the README's gateway section), continuation
    lines joined."""
    section = GATEWAY_GUIDE.read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL):
        joined = block.replace("\\\n", " ")
        commands += [line.strip() for line in joined.splitlines() if "curl " in line]
    return commands


def test_the_guide_curl_commands_name_real_routes() -> None:
    table = RouteTable(contract_routes())
    commands = guide_curl_commands()
    assert len(commands) >= 8, commands
    used = set()
    for command in commands:
        invocation = command[command.index("curl ") :]
        verb = re.search(r"\s-X\s+([A-Z]+)", invocation)
        method = verb[1] if verb else "GET"
        url = re.search(r"\$GW(/[^\s\"']*)", invocation)
        assert url, f"guide: no $GW URL in {command}"
        path = re.sub(r"\$\{?(\w+)\}?", "x", url[1].split("?")[0])
        if path in ("/openapi.json", "/healthz"):
            continue
        found = table.find(method, path)
        assert isinstance(found, Match), f"guide: {method} {path} is no route ({command})"
        used.add(found.route.method.name)
    assert {
        "PutPolicy",
        "GetInvalidReadContinuityCandidate",
        "RequestInvalidReadContinuity",
    } <= used
