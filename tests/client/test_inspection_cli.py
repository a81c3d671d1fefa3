"""The journal inspection through the Python client and the CLI, on a real ledger server."""

from __future__ import annotations

import dataclasses
import json

from forge.continuity.v1 import inspection_pb2, ledger_pb2_grpc
from services.demo.seed import load_fixture, seed_held_run
from shared.continuity.canonical import canonical_bytes, digest_of
from shared.runtime.errors import NotFound
from tests.client.conftest import ClientFactory, CliRunner, lines
from tests.support import Served

SECRET = "ghp_" + "T3stT0kenValue" * 3


def seed_with_secret(served: Served) -> None:
    fixture = load_fixture("v1_basic")
    envelope = json.loads(fixture.checkpoint)
    part = envelope["state"]["messages"][0]["parts"][0]
    part["content"] += f" token={SECRET}"
    envelope["state_digest"] = digest_of(envelope["state"])
    writer = ledger_pb2_grpc.LedgerServiceStub(served.channel("writer-token"))
    seed_held_run(
        writer, dataclasses.replace(fixture, checkpoint=canonical_bytes(envelope)), "run-1"
    )


def test_the_client_inspects_and_refuses_with_typed_errors(
    client_for: ClientFactory, ledger_served: Served
) -> None:
    seed_with_secret(ledger_served)
    client = client_for("reader-token")
    report = client.inspect_journal("run-1")
    assert report.records[0].status == inspection_pb2.INSPECTED_RECORD_STATUS_INSPECTED
    assert [(f.kind, f.location) for f in report.records[0].credential_findings] == [
        ("github_token", "/state/messages/0/parts/0/content")
    ]
    assert SECRET.encode() not in report.SerializeToString()
    try:
        client.inspect_journal("no-such-run")
    except NotFound as error:
        assert error.reason == "RUN_NOT_FOUND"
    else:
        raise AssertionError("an unknown run must be refused")


def test_the_cli_prints_findings_never_values(cli: CliRunner, ledger_served: Served) -> None:
    seed_with_secret(ledger_served)
    result = cli("journal", "inspect", "run-1", ledger=ledger_served.target)
    assert result.code == 0
    assert SECRET not in result.out
    assert any(line.split() == ["credential_findings:", "1"] for line in lines(result.out))
    assert any(
        line.split() == ["credential", "github_token", "at", "/state/messages/0/parts/0/content"]
        for line in lines(result.out)
    )
    as_json = cli("--json", "journal", "inspect", "run-1", ledger=ledger_served.target)
    assert as_json.code == 0 and SECRET not in as_json.out
    document = json.loads(as_json.out)
    assert "[REDACTED:github_token]" in document["records"][0]["record_json"]
    missing = cli("journal", "inspect", "no-such-run", ledger=ledger_served.target)
    assert missing.code == 1 and missing.err.startswith("error: NOT_FOUND RUN_NOT_FOUND: ")
