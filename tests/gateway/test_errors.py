"""Refusals over HTTP: each gRPC code at its standard HTTP status with the google.rpc.Status body,
and the gateway's own refusals (bad JSON, oversized bodies, unknown routes) made before any call,
so nothing is written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from services.gateway.config import GatewaySettings
from services.gateway.status import HTTP_STATUS_OF_CODE
from tests.gateway.conftest import (
    RunningGateway,
    enable_policy,
    read_candidate,
    reason_of,
    running_gateway,
    seed,
    v1_submission,
)

REQUESTS = "/api/v1/runs/{run}/invalid-read-continuity/requests/{request}"
POLICY = "/api/v1/invalid-read-continuity/policy"


def refused(reply: httpx2.Response, http: int, code: int, reason: str) -> dict[str, Any]:
    assert reply.status_code == http, reply.text
    assert reply.headers["content-type"] == "application/json"
    body: dict[str, Any] = reply.json()
    assert body["code"] == code, body
    assert body["message"]
    assert reason_of(body) == reason, body
    return body


def test_the_mapping_is_the_google_rpc_one() -> None:
    assert HTTP_STATUS_OF_CODE == {
        0: 200, 1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403,
        8: 429, 9: 400, 10: 409, 11: 400, 12: 501, 13: 500, 14: 503, 15: 500, 16: 401,
    }  # fmt: skip


def test_authentication_and_authorization_refusals(gateway: RunningGateway) -> None:
    with gateway.client() as anonymous:
        missing = refused(anonymous.get(POLICY), 401, 16, "CREDENTIALS_MISSING")
    with gateway.client("no-such-token") as unknown:
        refused(unknown.get(POLICY), 401, 16, "CREDENTIALS_UNKNOWN")
    with httpx2.Client(base_url=gateway.url, headers={"authorization": "Basic eDp5"}) as basic:
        malformed = refused(basic.get(POLICY), 401, 16, "CREDENTIALS_MALFORMED")
    # On HTTP the refusal speaks of the Authorization header, never of gRPC metadata.
    for body in (missing, malformed):
        assert "Authorization" in body["message"] and "header" in body["message"], body
        assert "metadata" not in body["message"], body
    with gateway.client("reader-token") as reader:
        assert reader.get(POLICY).status_code == 200  # the token passes through as metadata
        body = refused(
            reader.put(POLICY, json={"expected_revision": "1", "settings": {}}),
            403,
            7,
            "ROLE_REQUIRED",
        )
    info = next(d for d in body["details"] if d["@type"].endswith("ErrorInfo"))
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert info["domain"] == "continuity.forge"


def test_service_refusals_keep_their_code_reason_and_details(gateway: RunningGateway) -> None:
    seed(gateway, "run-1")
    enable_policy(gateway)
    with gateway.client("reader-token") as reader:
        body = refused(reader.get("/api/v1/runs/nope"), 404, 5, "RUN_NOT_FOUND")
        # An encoded slash stays inside the variable: the route matches and the service itself
        # refuses the run id "a/b" (the gateway does not answer ROUTE_NOT_FOUND).
        refused(reader.get("/api/v1/runs/a%2Fb"), 400, 3, "FIELD_INVALID")
    assert next(d for d in body["details"] if "ErrorInfo" in d["@type"])["metadata"] == {
        "run_id": "nope"
    }
    with gateway.client("admin-token") as admin:
        refused(
            admin.put(POLICY, json={"expected_revision": "1", "settings": {"window_seconds": 60}}),
            409,
            10,
            "POLICY_REVISION_STALE",
        )
    candidate = read_candidate(gateway, "run-1")
    path = REQUESTS.format(run="run-1", request="req-1")
    with gateway.client("operator-token") as operator:
        refused(
            operator.post(path, json=v1_submission(candidate, version=2)),
            400,
            3,
            "VERSION_UNSUPPORTED",
        )
        stale = dict(candidate["digests"], candidate_digest="sha256:" + "0" * 64)
        body = refused(
            operator.post(path, json=v1_submission(candidate, digests=stale)),
            400,
            9,
            "CANDIDATE_DIGEST_STALE",
        )
        assert any(d["@type"].endswith("PreconditionFailure") for d in body["details"])
        assert operator.post(path, json=v1_submission(candidate)).status_code == 200
        other = dict(candidate["digests"], candidate_digest="sha256:" + "1" * 64)
        refused(
            operator.post(path, json=v1_submission(candidate, digests=other)),
            409,
            6,
            "REQUEST_ID_CONFLICT",
        )


def test_the_command_limit_is_429(gateway: RunningGateway) -> None:
    seed(gateway, "run-1", commands_before=11, command_limit=12)
    enable_policy(gateway)
    candidate = read_candidate(gateway, "run-1")
    with gateway.client("operator-token") as operator:
        ticket = operator.post(
            REQUESTS.format(run="run-1", request="req-1"), json=v1_submission(candidate)
        ).json()["ticket"]
    execution_request_id = ticket["execution_request"]["execution_request_id"]
    with gateway.client("reader-token") as reader:
        run = reader.get("/api/v1/runs/run-1").json()["run"]
    with gateway.client("worker-token") as worker:
        claim = worker.post(
            f"/api/v1/execution-requests/{execution_request_id}:claim",
            json={key: run[key] for key in ("source_revision", "configuration_digest",
                                            "source_profile", "attempt_id")},
        )  # fmt: skip
        assert claim.status_code == 200, claim.text
        generation = claim.json()["execution_request"]["lease"]["generation"]
        commands = f"/api/v1/execution-requests/{execution_request_id}/commands"
        digest = {"command_digest": "sha256:" + "a" * 64, "lease_generation": generation}
        assert worker.post(f"{commands}/cmd-12", json=digest).status_code == 200
        refused(worker.post(f"{commands}/cmd-13", json=digest), 429, 8, "COMMAND_LIMIT_REACHED")


def test_readonly_observation_acknowledgements_must_be_json_booleans(
    gateway: RunningGateway,
) -> None:
    """A string "true" or the number 1 is not the Boolean true: refused before any call, so
    nothing is written; the read of an unsaved action is RECOVERY_NOT_FOUND."""
    seed(gateway, "run-1")
    path = REQUESTS.format(run="run-1", request="req-1") + "/readonly-observation-recoveries/obs-1"
    body: dict[str, Any] = {
        "candidate_digest": "sha256:" + "1" * 64,
        "valid_for_seconds": 600,
        "acknowledge_unavailable_observation": True,
        "acknowledge_no_original_callback_replay": True,
        "acknowledge_same_request_attempt_and_budgets": True,
        "acknowledge_finite_ownership_lease": True,
    }
    before = gateway.rows()
    with gateway.client("admin-token") as admin:
        for wrong in ("true", 1):
            sent = {**body, "acknowledge_unavailable_observation": wrong}
            reply = refused(admin.post(path, json=sent), 400, 3, "INVALID_JSON")
            assert "acknowledge_unavailable_observation" in reply["message"]
        refused(
            admin.get(
                REQUESTS.format(run="run-1", request="req-1") + "/readonly-observation-recovery"
            ),
            404,
            5,
            "RECOVERY_NOT_FOUND",
        )
    assert gateway.rows() == before


@pytest.fixture
def dead_backends() -> Iterator[str]:
    """A gateway whose services are not running (nothing listens on the targets)."""
    settings = GatewaySettings(
        targets=dict.fromkeys(("ledger", "candidate", "admission"), "127.0.0.1:1"),
        call_timeout_seconds=5,
    )
    with running_gateway(settings) as url:
        yield url


def test_an_unreachable_service_is_503(dead_backends: str) -> None:
    with httpx2.Client(base_url=dead_backends) as client:
        reply = client.get(POLICY, headers={"authorization": "Bearer reader-token"})
    assert reply.status_code == 503, reply.text
    assert reply.json()["code"] == 14


def test_unknown_routes_and_methods(gateway: RunningGateway) -> None:
    with gateway.client("reader-token") as client:
        refused(client.get("/api/v1/nowhere"), 404, 5, "ROUTE_NOT_FOUND")
        reply = client.delete("/api/v1/runs/run-1")
        refused(reply, 405, 12, "METHOD_NOT_ALLOWED")
        assert reply.headers["allow"] == "GET, PUT"


def test_the_first_urls_answer(gateway: RunningGateway) -> None:
    """`/` leads to the console; the API root the ready line prints answers an index whose
    links all work, instead of ROUTE_NOT_FOUND."""
    with gateway.client() as client:
        root = client.get("/", follow_redirects=False)
        assert root.status_code == 307 and root.headers["location"] == "/console/"
        assert client.get("/", follow_redirects=True).status_code == 200
        for path in ("/api/v1", "/api/v1/"):
            reply = client.get(path)
            assert reply.status_code == 200, (path, reply.text)
            index = reply.json()
            assert index["name"] == "forge-continuity" and index["version"]
            assert index["api_root"] == "/api/v1"
            assert set(index["links"]) == {"openapi", "console", "health"}
            for link in index["links"].values():
                assert client.get(link).status_code == 200, link
        refused(client.get("/api/v2"), 404, 5, "ROUTE_NOT_FOUND")


def test_bad_requests_are_refused_before_any_call(gateway: RunningGateway) -> None:
    seed(gateway, "run-1")
    enable_policy(gateway)
    candidate = read_candidate(gateway, "run-1")
    path = REQUESTS.format(run="run-1", request="req-1")
    before = gateway.rows()
    with gateway.client("operator-token") as operator:

        def post(content: bytes, **headers: str) -> httpx2.Response:
            return operator.post(
                path, content=content, headers={"content-type": "application/json", **headers}
            )

        refused(post(b'{"version": 1,'), 400, 3, "INVALID_JSON")
        refused(post(b"[1, 2]"), 400, 3, "INVALID_JSON")
        refused(post(b"\xff\xfe"), 400, 3, "INVALID_JSON")
        # A string where a Boolean is required is refused, as on gRPC.
        as_text = v1_submission(candidate, acknowledge_no_new_grant="true")
        body = refused(operator.post(path, json=as_text), 400, 3, "INVALID_JSON")
        assert "acknowledge_no_new_grant" in body["message"]
        body = refused(
            operator.post(path, json=v1_submission(candidate, surprise=1)), 400, 3, "INVALID_JSON"
        )
        # The unknown field is named, and the known ones are listed as the docs spell them.
        assert "unknown field 'surprise'" in body["message"]
        assert "valid_for_seconds, acknowledge_no_new_grant" in body["message"]
        assert "validForSeconds" not in body["message"]
        nested = v1_submission(candidate)
        nested["digests"] = {**nested["digests"], "surprise_digest": "x"}
        body = refused(operator.post(path, json=nested), 400, 3, "INVALID_JSON")
        assert "unknown field 'surprise_digest' in digests" in body["message"]
        assert "candidate_digest, run_digest" in body["message"]
        assert "candidateDigest" not in body["message"]
        refused(
            operator.post(path, json=v1_submission(candidate, run_id="run-2")),
            400,
            3,
            "PATH_AND_BODY_DISAGREE",
        )
        refused(
            operator.post(path, params={"version": "1"}, json=v1_submission(candidate)),
            400,
            3,
            "INVALID_PARAMETER",
        )
        oversized = b'{"version": 1, "pad": "' + b"x" * (64 * 1024) + b'"}'
        body = refused(post(oversized), 413, 8, "REQUEST_BODY_TOO_LARGE")
        assert next(d for d in body["details"] if "ErrorInfo" in d["@type"])["metadata"] == {
            "limit_bytes": str(64 * 1024)
        }

        def chunks() -> Iterator[bytes]:  # no Content-Length: the cap applies while reading
            yield b'{"version": 1, "pad": "'
            for _ in range(100):
                yield b"x" * 1024
            yield b'"}'

        refused(operator.post(path, content=chunks()), 413, 8, "REQUEST_BODY_TOO_LARGE")
    with gateway.client("reader-token") as reader:
        refused(reader.get("/api/v1/runs/run-1", params={"nope": "1"}), 400, 3, "INVALID_PARAMETER")
        refused(
            reader.get("/api/v1/runs/run-1", params={"run_id": "run-2"}),
            400,
            3,
            "INVALID_PARAMETER",
        )
        refused(
            reader.get("/api/v1/runs/run-1/journal", params=[("page_size", "1")] * 2),
            400,
            3,
            "INVALID_PARAMETER",
        )
        refused(
            reader.get("/api/v1/runs/run-1/journal", params={"page_size": "ten"}),
            400,
            3,
            "INVALID_JSON",
        )
        refused(
            reader.get("/api/v1/runs/run-1/journal:stream", params={"follow": "yes"}),
            400,
            3,
            "INVALID_PARAMETER",
        )
    assert gateway.rows() == before, "a refused request wrote to the ledger"
    with gateway.client("operator-token") as operator:
        # proto3 JSON names are accepted as well as proto names.
        camel = {
            "digests": candidate["digests"],
            "version": 1,
            "validForSeconds": "1800",
            "acknowledgeNoNewGrant": True,
            "acknowledgeOriginalConsumption": True,
            "acknowledgeRenewedSameAttemptLease": True,
        }
        reply = operator.post(path, json=camel)
    assert reply.status_code == 200, reply.text
    assert reply.json()["created"] is True
    ticket = reply.json()["ticket"]
    assert ticket["operator_identity"] == "olga-operator"  # output: proto field names
    assert ticket["settlement_sequence"] == str(int(ticket["claim_sequence"]) - 1)  # int64: text


def test_a_stream_that_fails_after_its_first_line_ends_with_an_error_line(
    gateway: RunningGateway,
) -> None:
    seed(gateway, "run-1")
    with (
        gateway.client("reader-token") as reader,
        reader.stream(
            "GET", "/api/v1/runs/run-1/journal:stream", params={"follow": "true"}
        ) as reply,
    ):
        assert reply.status_code == 200
        lines = reply.iter_lines()
        first = json.loads(next(lines))
        assert first["entry"]["sequence"] == "1"
        gateway.ledger.running.stop(grace=0)  # the ledger goes away mid-stream
        rest = [json.loads(line) for line in lines if line]
    assert "error" in rest[-1], rest[-1]
    assert rest[-1]["error"]["code"] in (1, 14)  # CANCELLED or UNAVAILABLE
    assert all("entry" in line for line in rest[:-1])


def test_a_refused_claim_carries_its_handoff_in_the_json_body(gateway: RunningGateway) -> None:
    """The handoff the ledger reads for a refused continuation action (ADR 0046) is one more
    detail of the Status body, in the proto3 JSON mapping with its ``@type``."""
    seed(gateway, "run-1")
    enable_policy(gateway)
    candidate = read_candidate(gateway, "run-1")
    with gateway.client("operator-token") as operator:
        ticket = operator.post(
            REQUESTS.format(run="run-1", request="req-1"), json=v1_submission(candidate)
        ).json()["ticket"]
    execution_request_id = ticket["execution_request"]["execution_request_id"]
    with gateway.client("reader-token") as reader:
        run = reader.get("/api/v1/runs/run-1").json()["run"]
    source = {key: run[key] for key in ("configuration_digest", "source_profile", "attempt_id")}
    with gateway.client("worker-token") as worker:
        body = refused(
            worker.post(
                f"/api/v1/execution-requests/{execution_request_id}:claim",
                json={**source, "source_revision": "git:0000000"},
            ),
            400,
            9,
            "CLAIM_CHECK_FAILED",
        )
    (handoff,) = [
        d for d in body["details"] if d["@type"].endswith("/forge.continuity.v1.HandoffPayload")
    ]
    assert handoff["@type"] == "type.googleapis.com/forge.continuity.v1.HandoffPayload"
    assert [b["execution_request_id"] for b in handoff["bound_requests"]] == [execution_request_id]
    assert [a["action"] for a in handoff["permitted_next_actions"]] == ["present_run_source"]
