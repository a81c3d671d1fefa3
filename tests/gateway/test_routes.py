"""The route table comes from the descriptors' google.api.http rules, and the OpenAPI document
from the same table (checked in as docs/openapi.json, served at /openapi.json)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest
from google.api import annotations_pb2

from services.gateway.config import GatewaySettings
from services.gateway.openapi import DEFAULT_OUTPUT, document_text
from services.gateway.routes import (
    Match,
    RouteTable,
    TemplateError,
    compile_template,
    contract_routes,
    contract_services,
)
from tests.gateway.conftest import RunningGateway, running_gateway

ROOT = Path(__file__).resolve().parents[2]
# The operator steps of the spec, as it writes them.
SPEC_ROUTES = {
    ("PUT", "/api/v1/invalid-read-continuity/policy"),
    ("GET", "/api/v1/runs/{run_id}/invalid-read-continuity/candidate"),
    ("POST", "/api/v1/runs/{run_id}/invalid-read-continuity/requests/{request_id}"),
    ("GET", "/api/v1/runs/{run_id}/invalid-read-continuity/requests/{request_id}"),
    ("POST", "/api/v1/runs/{run_id}/invalid-read-continuity/requests-v2/{request_id}"),
    (
        "POST",
        "/api/v1/runs/{run_id}/invalid-read-continuity/requests/{request_id}/recoveries/{recovery_id}",
    ),
}


def test_every_http_rule_of_the_contracts_is_a_route() -> None:
    annotated = {
        method.full_name
        for service in contract_services()
        for method in service.methods
        if method.GetOptions().HasExtension(annotations_pb2.http)
    }
    routes = contract_routes()
    assert {route.method.full_name for route in routes} == annotated
    # 31 + ExecutionService.FailUnclaimedExecutionRequest + the four of ReconciliationService
    # + LedgerService.InspectJournal + AdmissionService.GetCallerPermissions
    # + ExecutionService.CancelExecutionRequest and ExpireExecutionRequests
    # + LedgerService.GetSigningKeys and ListSignedHeads (the signed heads of ADR 0015)
    # + AdmissionService.ListRecoveryWorkflows
    # + LedgerService.ListRuns and ExecutionService.ListAllExecutionRequests (ADR 0022)
    # + LedgerService.ListHeads (the head feed monitors follow, ADR 0015)
    assert len(routes) == len(annotated) == 46
    assert {(route.http_method, route.template.text) for route in routes} >= SPEC_ROUTES
    assert all(route.server in {"ledger", "candidate", "admission"} for route in routes)


def test_the_gateway_has_no_hand_written_route() -> None:
    for source in (ROOT / "services" / "gateway").glob("*.py"):
        assert "/api/" not in source.read_text(encoding="utf-8"), source


def test_templates_follow_the_http_rule_grammar() -> None:
    claim = compile_template("/api/v1/execution-requests/{execution_request_id}:claim")
    assert claim.match("/api/v1/execution-requests/er-1:claim") == {"execution_request_id": "er-1"}
    assert claim.match("/api/v1/execution-requests/er-1") is None
    nested = compile_template("/v1/{parent.name=projects/*}/things/{id}")
    assert nested.variables == ("parent.name", "id")
    assert nested.match("/v1/projects/p%2F1/things/7") == {"parent.name": "projects/p/1", "id": "7"}
    assert nested.match("/v1/other/p/things/7") is None
    rest = compile_template("/v1/files/{path=**}")
    assert rest.match("/v1/files/a/b/c") == {"path": "a/b/c"}
    with pytest.raises(TemplateError):
        compile_template("v1/{unclosed")


def test_the_table_prefers_literal_routes_and_reports_allowed_methods() -> None:
    table = RouteTable(contract_routes())
    found = table.find("GET", "/api/v1/runs/r-1/journal:stream")
    assert isinstance(found, Match) and found.route.method.name == "StreamJournal"
    found = table.find("GET", "/api/v1/runs/r-1/journal")
    assert isinstance(found, Match) and found.route.method.name == "ReadJournal"
    found = table.find("POST", "/api/v1/execution-requests/er-1:claim")
    assert isinstance(found, Match) and found.route.method.name == "ClaimExecutionRequest"
    assert found.variables == {"execution_request_id": "er-1"}
    assert table.find("DELETE", "/api/v1/invalid-read-continuity/policy") == ("GET", "PUT")
    assert table.find("GET", "/api/v2/anything") == ()


def test_the_checked_in_openapi_document_matches_the_protos() -> None:
    checked_in = (ROOT / DEFAULT_OUTPUT).read_text(encoding="utf-8")
    assert checked_in == document_text(), "docs/openapi.json drifted: run `make openapi`"


def test_the_openapi_document_describes_every_route() -> None:
    document = json.loads(document_text())
    assert document["openapi"].startswith("3.")
    for route in contract_routes():
        operation = document["paths"][route.template.openapi_path][route.http_method.lower()]
        path_parameters = [p["name"] for p in operation.get("parameters", []) if p["in"] == "path"]
        assert path_parameters == list(route.template.variables)
        assert ("requestBody" in operation) == bool(route.body)
    submit = document["paths"][
        "/api/v1/runs/{run_id}/invalid-read-continuity/requests/{request_id}"
    ]
    schema_name = submit["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = document["components"]["schemas"][schema_name.rsplit("/", 1)[-1]]
    assert schema["properties"]["acknowledge_no_new_grant"] == {"type": "boolean"}
    assert schema["properties"]["valid_for_seconds"] == {"type": "string", "format": "int64"}
    stream = document["paths"]["/api/v1/runs/{run_id}/journal:stream"]["get"]
    assert "application/x-ndjson" in stream["responses"]["200"]["content"]
    queries = {p["name"] for p in stream["parameters"] if p["in"] == "query"}
    assert queries == {"from_sequence", "follow", "max_entries_per_message"}


def test_the_gateway_serves_its_openapi_document_and_health() -> None:
    """/healthz is NOT_SERVING while a server it calls does not answer, and tells the caller
    nothing more (the servers and their addresses are logged)."""
    settings = GatewaySettings(
        targets=dict.fromkeys(("ledger", "candidate", "admission"), "127.0.0.1:1")
    )
    with running_gateway(settings) as url, httpx2.Client(base_url=url) as client:
        served = client.get("/openapi.json")
        health = client.get("/healthz")
        alive = client.get("/livez")
    assert served.status_code == 200
    assert served.json() == json.loads(document_text())
    assert health.status_code == 503
    assert health.json() == {"status": "NOT_SERVING"}
    assert "127.0.0.1:1" not in health.text
    # Liveness is the process alone: up while every server it calls is down.
    assert (alive.status_code, alive.json()) == (200, {"status": "SERVING"})


def test_the_gateway_is_serving_once_every_server_answers(gateway: RunningGateway) -> None:
    with gateway.client("reader-token") as client:
        health = client.get("/healthz")
    assert (health.status_code, health.json()) == (200, {"status": "SERVING"})
