"""The client methods and the CLI commands of reconciliation, against real services."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import Engine

from services.client.cli import main
from services.ledger.service import Ledger
from shared.runtime.errors import Conflict, FailedPrecondition, InvalidArgument
from tests.admission.conftest import Stack
from tests.recovery.conftest import Authority
from tests.recovery.test_client_and_cli import client
from tests.recovery.test_reconciliation import EvidenceVerifier, claimed_request
from tests.support import row_counts


@pytest.fixture
def ledger(engine: Engine, authority: Authority) -> Ledger:
    return Ledger(engine, authority=authority, verifier=EvidenceVerifier())


def test_the_client_inspects_verifies_decides_and_reads_back(stack: Stack, engine: Engine) -> None:
    owned = claimed_request(stack, commands=1)
    with client(stack, "admin-token") as admin:
        snapshot = admin.inspect_reconciliation("run-1", owned.execution_request_id, "rcn-1")
        before = row_counts(engine)
        for bad in ({"decision": "retry"}, {"decision": "retry_stage", "evidence_reference": ""}):
            with pytest.raises(InvalidArgument) as local:
                admin.reconcile_execution_request(
                    snapshot, **{"evidence_reference": "incident-1", **bad}
                )
            assert local.value.metadata["origin"] == "client"
        with pytest.raises(FailedPrecondition) as unverified:
            admin.reconcile_execution_request(
                snapshot, decision="retry_stage", evidence_reference="incident-1"
            )
        assert unverified.value.reason == "RECONCILIATION_UNRESOLVED"
        assert row_counts(engine) == before
        verification = admin.verify_reconciliation(snapshot, "stopped")
        assert verification.reconciliation_digest == snapshot.reconciliation_digest
        done = admin.reconcile_execution_request(
            snapshot, decision="retry_stage", evidence_reference="incident-1"
        )
        assert done.created and done.reconciliation.retry_request.execution_request_id
        assert admin.reconciliation("run-1", owned.execution_request_id) == done.reconciliation
        with pytest.raises(Conflict) as conflict:
            admin.reconcile_execution_request(
                snapshot, decision="mark_unresolved", evidence_reference="incident-1"
            )
        assert conflict.value.reason == "RECONCILIATION_ID_CONFLICT"


def test_the_cli_inspects_submits_and_shows(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    owned = claimed_request(stack, commands=0)
    targets = [
        *("--ledger", stack.ledger.target),
        *("--candidate", stack.candidate.target),
        *("--admission", stack.admission.target),
    ]

    def cli(*argv: str, token: str = "admin-token") -> tuple[int, str]:
        capsys.readouterr()
        code = main(["--token", token, *targets, *argv], env={})
        return code, capsys.readouterr().out

    def refused(*argv: str) -> str:
        capsys.readouterr()
        assert main(["--token", "admin-token", *targets, *argv], env={}) == 1
        return capsys.readouterr().err

    exr = owned.execution_request_id
    code, out = cli("--json", "reconcile", "inspect", "run-1", exr, "rcn-1")
    assert code == 0
    digest = json.loads(out)["snapshot"]["reconciliation_digest"]
    submit = [
        *("reconcile", "submit", "run-1", exr, "rcn-1", "--evidence-reference", "incident-7"),
        *("--decision", "mark_unresolved"),
    ]
    assert cli(*submit, "--reconciliation-digest", "sha256:" + "0" * 64)[0] == 1  # stale
    assert cli(*submit, "--reconciliation-digest", digest, token="operator-token")[0] == 1
    # A decision the admissibility check refuses prints the handoff it carries: for people...
    retry = [*submit[:-1], "retry_stage", "--reconciliation-digest", digest]
    refusal = refused(*retry)
    assert "RECONCILIATION_UNRESOLVED" in refusal
    assert "  handoff:" in refusal and "    permitted next actions:" in refusal
    assert "      verify_reconciliation: " in refusal and "      mark_unresolved: " in refusal
    assert f"      {exr}: failed | committed | in_flight" in refusal
    # ... and in --json, beside the violations (proto3 JSON, as in a candidate)
    handoff = json.loads(refused("--json", *retry))["error"]["handoff"]
    assert [a["action"] for a in handoff["permitted_next_actions"]] == [
        "mark_unresolved",
        "verify_reconciliation",
    ]
    assert handoff["bound_requests"][0]["execution_request_id"] == exr
    # Nothing proves the worker stopped: marking it unresolved, which releases its claim, is
    # refused until the administrator acknowledges the cessation as unproven (ADR 0045).
    refusal = refused(*submit, "--reconciliation-digest", digest)
    assert "RECONCILIATION_UNRESOLVED" in refusal and "RECONCILIATION_NOT_VERIFIED" in refusal
    code, out = cli(*submit, "--reconciliation-digest", digest, "--cessation-unproven-acknowledged")
    assert code == 0 and "yes" in out
    assert any(line.split()[:2] == ["cessation:", "unproven"] for line in out.splitlines()), out
    # Short names where a person reads: no enum prefixes.
    assert any(line.split() == ["decision:", "mark_unresolved"] for line in out.splitlines()), out
    code, out = cli("reconcile", "show", "run-1", exr, token="reader-token")
    assert code == 0 and "rcn-1" in out
    assert any(line.split() == ["state:", "unresolved"] for line in out.splitlines()), out
    # The handoff after the decision names what blocks the request, and it was claimed: the
    # spent decision, never "not claimed" (issue 47).
    assert "(blocked by RECOVERY_SPENT)" in out and "REQUEST_NOT_CLAIMED" not in out, out
    assert "RECONCILIATION_DECISION_" not in out and "EXECUTION_REQUEST_STATE_" not in out
