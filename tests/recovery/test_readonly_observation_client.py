"""The client methods and the CLI commands of the read-only observation recovery, against real
services."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.client.cli import main
from services.demo.provider import RefusingProvider
from shared.runtime.errors import Conflict, InvalidArgument
from tests.admission.conftest import Stack
from tests.recovery.test_client_and_cli import client
from tests.recovery.test_never_claimed import ADA, ADA_IDENTITY
from tests.recovery.test_readonly_observation import consumed, refusal_recovered

PROTOS = Path(__file__).resolve().parents[2] / "protos"
ACKNOWLEDGED = {
    "acknowledge_unavailable_observation": True,
    "acknowledge_no_original_callback_replay": True,
    "acknowledge_same_request_attempt_and_budgets": True,
    "acknowledge_finite_ownership_lease": True,
}


def test_the_client_methods_carry_the_spec_names(stack: Stack, provider: RefusingProvider) -> None:
    ticket, sent = refusal_recovered(stack, provider)
    consumed(stack, ticket, sent)
    with client(stack, ADA) as ada:
        candidate = ada.readonly_observation_recovery_candidate("run-1", "req-1")
        assert candidate.eligible, candidate.holds
        # each acknowledgement must be the Boolean true: refused before anything is sent
        with pytest.raises(InvalidArgument) as local:
            ada.request_readonly_observation_recovery(
                "run-1", "req-1", "obs-1", candidate_digest=candidate, valid_for_seconds=600,
                **{**ACKNOWLEDGED, "acknowledge_unavailable_observation": "true"},  # type: ignore[arg-type]
            )  # fmt: skip
        assert local.value.reason == "ACKNOWLEDGEMENT_REQUIRED"
        submitted = ada.request_readonly_observation_recovery(
            "run-1", "req-1", "obs-1", candidate_digest=candidate, valid_for_seconds=600,
            **ACKNOWLEDGED,
        )  # fmt: skip
        assert submitted.created and submitted.outcome.actor == ADA_IDENTITY
        assert ada.readonly_observation_recovery("run-1", "req-1") == submitted.outcome
        with pytest.raises(Conflict) as refused:
            ada.request_readonly_observation_recovery(
                "run-1", "req-1", "obs-2", candidate_digest=candidate, valid_for_seconds=600,
                **ACKNOWLEDGED,
            )  # fmt: skip
        assert refused.value.reason == "RECOVERY_ALREADY_SPENT"


def test_the_cli_reviews_submits_and_shows(
    stack: Stack, capsys: pytest.CaptureFixture[str], provider: RefusingProvider
) -> None:
    ticket, sent = refusal_recovered(stack, provider)
    consumed(stack, ticket, sent)
    targets = [
        *("--ledger", stack.ledger.target),
        *("--candidate", stack.candidate.target),
        *("--admission", stack.admission.target),
    ]

    def cli(*argv: str, token: str = ADA) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["--token", token, *targets, *argv], env={})
        return code, capsys.readouterr().out

    code, out = cli("--json", "observation", "candidate", "run-1", "req-1")
    assert code == 0
    candidate = json.loads(out)["candidate"]
    assert candidate["eligible"] is True
    submit = [
        *("observation", "submit", "run-1", "req-1", "obs-1"),
        *("--candidate-digest", candidate["candidate_digest"], "--valid-for-seconds", "600"),
    ]
    assert cli(*submit)[0] == 1  # no acknowledgement: refused locally, nothing sent
    flags = ["--" + name.replace("_", "-") for name in ACKNOWLEDGED]
    code, out = cli(*submit, *flags)
    assert code == 0 and "created" in out and "derived checkpoint" in out
    code, out = cli("observation", "show", "run-1", "req-1", token="reader-token")
    assert code == 0 and "obs-1" in out and ADA_IDENTITY in out
