"""The listing routes (ADR 0022) as curl calls them: query parameters, short enum names in a
state filter and in the per-run states parameter, and refusals that name what is allowed."""

from __future__ import annotations

from urllib.parse import quote

from services.demo.seed import load_fixture, seed_held_run
from tests.gateway.conftest import RunningGateway
from tests.gateway.http_stub import HttpStub

V1 = "forge.continuity.v1."


def test_runs_and_requests_are_listed_by_query_parameters(gateway: RunningGateway) -> None:
    writer = HttpStub(gateway.client("writer-token"), V1 + "LedgerService")
    seed_held_run(writer, load_fixture("v1_basic"), "run-1")
    seed_held_run(writer, load_fixture("v1_basic"), "run-2")
    reader = gateway.client("reader-token")
    held = reader.get(f"/api/v1/runs?filter={quote('held = true')}&page_size=1")
    assert held.status_code == 200, held.text
    body = held.json()
    assert [row["run"]["run_id"] for row in body["runs"]] == ["run-2"]
    assert body["runs"][0]["continuity_state"] == "RUN_CONTINUITY_STATE_HELD"
    rest = reader.get(
        "/api/v1/runs", params={"filter": "held = true", "page_token": body["next_page_token"]}
    )
    assert [row["run"]["run_id"] for row in rest.json()["runs"]] == ["run-1"]
    assert rest.json()["next_page_token"] == ""
    for spelling in ("QUEUED", "queued", "EXECUTION_REQUEST_STATE_QUEUED"):
        per_run = reader.get(f"/api/v1/runs/run-1/execution-requests?states={spelling}")
        assert per_run.status_code == 200, per_run.text
        across = reader.get("/api/v1/execution-requests", params={"filter": f"state = {spelling}"})
        assert across.status_code == 200, across.text
        assert across.json() == {"execution_requests": [], "next_page_token": ""}
    unknown = reader.get("/api/v1/runs/run-1/execution-requests?states=SLEEPING")
    assert unknown.status_code == 400


def test_a_bad_filter_or_token_is_a_400_naming_what_is_allowed(gateway: RunningGateway) -> None:
    reader = gateway.client("reader-token")
    refused = reader.get("/api/v1/runs", params={"filter": "owner = me"})
    assert refused.status_code == 400
    [info] = [d for d in refused.json()["details"] if d["@type"].endswith("ErrorInfo")]
    assert info["reason"] == "FILTER_INVALID"
    assert info["metadata"]["allowed_fields"] == (
        "state, held, admitted, unresolved, updated_at, run_id"
    )
    token = reader.get("/api/v1/execution-requests", params={"page_token": "bogus"})
    assert token.status_code == 400
    [info] = [d for d in token.json()["details"] if d["@type"].endswith("ErrorInfo")]
    assert info["reason"] == "PAGE_TOKEN_INVALID"
