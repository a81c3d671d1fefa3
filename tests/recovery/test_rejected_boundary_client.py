"""The client methods and the CLI commands of the rejected-boundary recovery, against real
services."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format

from services.client.cli import main
from services.demo.provider import RefusingProvider
from shared.contract.recovery_proto import reviewed_rejection_to_proto
from shared.runtime.errors import Conflict
from tests.admission.conftest import Stack
from tests.recovery.test_client_and_cli import client
from tests.recovery.test_never_claimed import ADA, ADA_IDENTITY
from tests.recovery.test_rejected_boundary import (
    CORRECTIVE,
    admit_enabled,
    refused_at_provider,
    review,
)

ACKNOWLEDGED = {
    "acknowledge_reviewed_provider_epoch": True,
    "acknowledge_no_response_or_tool_replay": True,
    "acknowledge_same_request_and_budgets": True,
    "acknowledge_finite_ownership_lease": True,
}


def test_the_client_methods_carry_the_spec_names(
    stack: Stack,
    provider: RefusingProvider,
) -> None:
    sent = refused_at_provider(stack, admit_enabled(stack), provider)
    reviewed = reviewed_rejection_to_proto(review(stack, sent))
    with client(stack, ADA) as ada:
        candidate = ada.rejected_boundary_recovery_candidate("run-1", "req-1", reviewed)
        assert candidate.eligible, candidate.holds
        submitted = ada.request_rejected_boundary_recovery(
            "run-1", "req-1", "rec-1", candidate_digest=candidate, reviewed_rejection=reviewed,
            valid_for_seconds=600, corrective_provider=CORRECTIVE, **ACKNOWLEDGED,
        )  # fmt: skip
        assert submitted.created and submitted.outcome.actor == ADA_IDENTITY
        assert ada.rejected_boundary_recovery("run-1", "req-1") == submitted.outcome
        with pytest.raises(Conflict) as refused:
            ada.request_rejected_boundary_recovery(
                "run-1", "req-1", "rec-2", candidate_digest=candidate,
                reviewed_rejection=reviewed, valid_for_seconds=600,
                corrective_provider=CORRECTIVE, **ACKNOWLEDGED,
            )  # fmt: skip
        assert refused.value.reason == "RECOVERY_ALREADY_SPENT"


def test_the_cli_reviews_submits_and_shows(
    stack: Stack,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    provider: RefusingProvider,
) -> None:
    sent = refused_at_provider(stack, admit_enabled(stack), provider)
    review_file = tmp_path / "review.json"
    review_file.write_text(
        json_format.MessageToJson(reviewed_rejection_to_proto(review(stack, sent)))
    )
    targets = [
        *("--ledger", stack.ledger.target),
        *("--candidate", stack.candidate.target),
        *("--admission", stack.admission.target),
    ]

    def cli(*argv: str, token: str = ADA) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["--token", token, *targets, *argv], env={})
        return code, capsys.readouterr().out

    code, out = cli(
        "--json", "refusal", "candidate", "run-1", "req-1", "--review", str(review_file)
    )
    assert code == 0
    candidate = json.loads(out)["candidate"]
    assert candidate["eligible"] is True
    submit = [
        *("refusal", "submit", "run-1", "req-1", "rec-1", "--review", str(review_file)),
        *("--candidate-digest", candidate["candidate_digest"], "--valid-for-seconds", "600"),
        *("--corrective-provider-epoch", CORRECTIVE.provider_epoch),
        *("--corrective-configuration-digest", CORRECTIVE.configuration_digest),
    ]
    assert cli(*submit)[0] == 1  # no acknowledgement: refused locally, nothing sent
    flags = ["--" + name.replace("_", "-") for name in ACKNOWLEDGED]
    code, out = cli(*submit, *flags)
    assert code == 0 and "created" in out and "settlement sequence" in out
    code, out = cli("refusal", "show", "run-1", "req-1", token="reader-token")
    assert code == 0 and "rec-1" in out and ADA_IDENTITY in out
    assert cli("refusal", "candidate", "run-1", "req-1", "--review", str(tmp_path / "no"))[0] == 2
