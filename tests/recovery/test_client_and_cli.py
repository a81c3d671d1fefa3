"""The client methods and the CLI commands of the never-claimed recovery, against real services."""

from __future__ import annotations

import json

import pytest

from services.client.cli import main
from services.client.client import ContinuityClient
from shared.runtime.errors import Conflict
from tests.admission.conftest import Stack
from tests.recovery.test_never_claimed import ADA, ADA_IDENTITY, admit, fail_unclaimed

ACKNOWLEDGED = {
    "acknowledge_never_claimed": True,
    "acknowledge_same_request_and_attempt": True,
    "acknowledge_budgets_charged": True,
    "acknowledge_same_attempt_lease": True,
}


def client(stack: Stack, token: str) -> ContinuityClient:
    return ContinuityClient(
        token,
        ledger_target=stack.ledger.target,
        candidate_target=stack.candidate.target,
        admission_target=stack.admission.target,
    )


def test_the_client_methods_carry_the_spec_names(stack: Stack) -> None:
    fail_unclaimed(stack, admit(stack))
    with client(stack, ADA) as ada:
        candidate = ada.invalid_read_recovery_candidate("run-1", "req-1")
        assert candidate.eligible
        submitted = ada.request_invalid_read_recovery(
            "run-1", "req-1", "rec-1", candidate_digest=candidate, valid_for_seconds=600,
            **ACKNOWLEDGED,
        )  # fmt: skip
        assert submitted.created and submitted.outcome.actor == ADA_IDENTITY
        assert ada.invalid_read_recovery("run-1", "req-1") == submitted.outcome
        with pytest.raises(Conflict) as refused:
            ada.request_invalid_read_recovery(
                "run-1", "req-1", "rec-2", candidate_digest=candidate, valid_for_seconds=600,
                **ACKNOWLEDGED,
            )  # fmt: skip
        assert refused.value.reason == "RECOVERY_ALREADY_SPENT"


def test_the_cli_reviews_submits_and_shows(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    fail_unclaimed(stack, admit(stack))
    targets = [
        *("--ledger", stack.ledger.target),
        *("--candidate", stack.candidate.target),
        *("--admission", stack.admission.target),
    ]

    def cli(*argv: str, token: str = ADA) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["--token", token, *targets, *argv], env={})
        return code, capsys.readouterr().out

    code, out = cli("--json", "recovery", "candidate", "run-1", "req-1")
    assert code == 0
    candidate = json.loads(out)["candidate"]
    assert candidate["eligible"] is True
    flags = [
        "--acknowledge-never-claimed",
        "--acknowledge-same-request-and-attempt",
        "--acknowledge-budgets-charged",
        "--acknowledge-same-attempt-lease",
    ]
    submit = [
        *("recovery", "submit", "run-1", "req-1", "rec-1"),
        *("--candidate-digest", candidate["candidate_digest"], "--valid-for-seconds", "600"),
    ]
    assert cli(*submit)[0] == 1  # no acknowledgement: refused locally, nothing sent
    code, out = cli(*submit, *flags)
    assert code == 0 and "created" in out and "yes" in out
    code, out = cli("recovery", "show", "run-1", "req-1", token="reader-token")
    assert code == 0 and "rec-1" in out and ADA_IDENTITY in out
