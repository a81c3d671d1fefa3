"""The client methods and the CLI commands of the rejected-boundary recovery, against real
services."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from google.protobuf import json_format

from services.client.cli import main
from services.demo.provider import RefusingProvider, SentRequest
from shared.contract import review_document
from shared.contract.recovery_proto import reviewed_rejection_to_proto
from shared.runtime.errors import Conflict, NotFound
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


def console_document(inputs: dict[str, object], **reviewed: object) -> str:
    """A review document as the console writes it (services/gateway/console/static/recoveries.js,
    saveReviewDocument): its key order, indentation and fields, not the Python writer's."""
    document = {
        "format": "forge.continuity.review/1",
        "workflow": "rejected_boundary",
        "run_id": "run-1",
        "request_id": "req-1",
        "inputs": inputs,
        **reviewed,
    }
    return json.dumps(document, indent=2) + "\n"


def console_inputs(stack: Stack, sent: SentRequest) -> dict[str, object]:
    return {
        "reviewed_rejection": json_format.MessageToDict(
            reviewed_rejection_to_proto(review(stack, sent)), preserving_proto_field_name=True
        ),
        "corrective_provider": json_format.MessageToDict(
            CORRECTIVE, preserving_proto_field_name=True
        ),
    }


Cli = Callable[..., tuple[int, str]]


@pytest.fixture
def cli(stack: Stack, capsys: pytest.CaptureFixture[str]) -> Cli:
    targets = [
        *("--ledger", stack.ledger.target),
        *("--candidate", stack.candidate.target),
        *("--admission", stack.admission.target),
    ]

    def run(*argv: str, token: str = ADA) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["--token", token, *targets, *argv], env={})
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    return run


def test_the_cli_reviews_writes_the_review_submits_and_shows(
    stack: Stack, cli: Cli, tmp_path: Path, provider: RefusingProvider
) -> None:
    sent = refused_at_provider(stack, admit_enabled(stack), provider)
    # A document in the console's shape, reviewed against another candidate: its digest and its
    # acknowledgements are not this candidate's.
    review_file = tmp_path / "review.json"
    review_file.write_text(
        console_document(
            console_inputs(stack, sent),
            candidate_digest="sha256:" + "0" * 64,
            acknowledgements=dict.fromkeys(ACKNOWLEDGED, True),
        )
    )
    reviewed_file = tmp_path / "reviewed.json"
    code, out = cli(
        *("--json", "refusal", "candidate", "run-1", "req-1", "--review", str(review_file)),
        *("--write-review", str(reviewed_file)),
    )
    assert code == 0, out
    candidate = json.loads(out)["candidate"]
    assert candidate["eligible"] is True
    # The CLI writes the one shape back with the digest the operator saw now, and without the
    # acknowledgements given for the other candidate.
    written = review_document.read(reviewed_file.read_text())
    assert written.candidate_digest == candidate["candidate_digest"]
    assert written.inputs == review_document.read(review_file.read_text()).inputs
    assert not written.acknowledgements
    submit = [
        *("refusal", "submit", "run-1", "req-1", "rec-1", "--review", str(reviewed_file)),
        *("--valid-for-seconds", "600"),
    ]
    assert cli(*submit)[0] == 1  # no acknowledgement: refused locally, nothing sent
    flags = ["--" + name.replace("_", "-") for name in ACKNOWLEDGED]
    code, out = cli(*submit, *flags)
    assert code == 0 and "created" in out and "settlement sequence" in out
    code, out = cli("refusal", "show", "run-1", "req-1", token="reader-token")
    assert code == 0 and "rec-1" in out and ADA_IDENTITY in out
    assert cli("refusal", "candidate", "run-1", "req-1", "--review", str(tmp_path / "no"))[0] == 2


def test_the_cli_admits_from_a_document_the_console_downloaded(
    stack: Stack, cli: Cli, tmp_path: Path, provider: RefusingProvider
) -> None:
    """The console's downloaded review (its digest and its four acknowledgements) is all the
    CLI's submission needs beside the action's own choices."""
    sent = refused_at_provider(stack, admit_enabled(stack), provider)
    inputs = console_inputs(stack, sent)
    digest = client_candidate_digest(stack, sent)
    downloaded = tmp_path / "review-run-1-req-1-rejected_boundary.json"
    downloaded.write_text(
        console_document(
            inputs,
            candidate_digest=digest,
            acknowledgements=dict.fromkeys(ACKNOWLEDGED, True),
        )
    )
    code, out = cli(
        *("refusal", "submit", "run-1", "req-1", "rec-1", "--review", str(downloaded)),
        *("--valid-for-seconds", "600"),
    )
    assert code == 0, out
    assert "created" in out
    with client(stack, ADA) as ada:
        outcome = ada.rejected_boundary_recovery("run-1", "req-1")
    assert outcome.recovery_id == "rec-1" and outcome.actor == ADA_IDENTITY


def client_candidate_digest(stack: Stack, sent: SentRequest) -> str:
    with client(stack, ADA) as ada:
        reviewed = reviewed_rejection_to_proto(review(stack, sent))
        return ada.rejected_boundary_recovery_candidate("run-1", "req-1", reviewed).candidate_digest


@pytest.mark.parametrize(
    ("document", "message"),
    [
        # The bare ReviewedProviderRejectionV1 the CLI read before version 1.
        (lambda inputs: json.dumps(inputs["reviewed_rejection"]), "unversioned review document"),
        # The console's unversioned document before version 1.
        (json.dumps, "this release reads forge.continuity.review/1"),
        (
            lambda inputs: console_document(inputs).replace('"req-1"', '"req-2"'),
            "not rejected_boundary of run run-1 request req-1",
        ),
        (
            lambda inputs: console_document(inputs, candidate_digest="sha256:" + "0" * 64),
            "is not the review document's candidate_digest",
        ),
        (
            lambda inputs: console_document({"reviewed_rejection": inputs["reviewed_rejection"]}),
            "has no inputs.corrective_provider",
        ),
    ],
)
def test_a_document_the_cli_cannot_use_is_a_usage_error_and_sends_nothing(
    stack: Stack,
    cli: Cli,
    tmp_path: Path,
    provider: RefusingProvider,
    document: Callable[[dict[str, object]], str],
    message: str,
) -> None:
    sent = refused_at_provider(stack, admit_enabled(stack), provider)
    path = tmp_path / "review.json"
    path.write_text(document(console_inputs(stack, sent)))
    code, out = cli(
        *("refusal", "submit", "run-1", "req-1", "rec-1", "--review", str(path)),
        *("--valid-for-seconds", "600", "--candidate-digest", "sha256:" + "1" * 64),
        *["--" + name.replace("_", "-") for name in ACKNOWLEDGED],
    )
    assert code == 2 and message in out, out
    with client(stack, ADA) as ada, pytest.raises(NotFound):
        ada.rejected_boundary_recovery("run-1", "req-1")
