"""The provider-refusal (rejected-boundary) recovery through the console: the administrator's
review document (forge.continuity.review/1, the CLI's --review file) is chosen as a file, the
server computes the candidate, and the same review pattern (four acknowledgements, one kept
action identity) follows. The console downloads the review in the same shape: the one reader
(shared/contract/review_document.py) reads it and the CLI admits from it."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from forge.continuity.v1 import ledger_pb2
from services.client.cli import main
from services.demo.provider import RefusingProvider, SentRequest
from shared.contract import review_document
from shared.contract.recovery_proto import reviewed_rejection_to_proto
from shared.contract.review_document import ReviewDocument
from tests.admission.conftest import Stack
from tests.console.conftest import (
    ADMIN_OPERATOR,
    assert_every_control_labelled,
    open_run,
    screenshot,
)
from tests.gateway.conftest import RunningGateway
from tests.recovery.test_rejected_boundary import (
    CORRECTIVE,
    admit_enabled,
    refused_at_provider,
    review,
)

ACKNOWLEDGEMENTS = {
    "acknowledge_reviewed_provider_epoch": (
        "The provider refused this request at the reviewed provider epoch, before admitting it."
    ),
    "acknowledge_no_response_or_tool_replay": "No model response and no tool callback is replayed.",
    "acknowledge_same_request_and_budgets": (
        "The same request, attempt and budgets continue; original usage stays charged."
    ),
    "acknowledge_finite_ownership_lease": (
        "Only a finite ownership lease for the same attempt is granted."
    ),
}


def refused_review(
    stack: Stack,
) -> tuple[ledger_pb2.AdmissionTicket, ReviewDocument]:
    """The run's first provider request refused, and the administrator's review of it as the
    CLI writes it (the one writer), before any candidate was read."""
    ticket = admit_enabled(stack)

    def refused() -> SentRequest:
        with RefusingProvider() as provider:
            return refused_at_provider(stack, ticket, provider)

    # The SDK runs its own event loop; Playwright's synchronous API holds this thread's loop.
    with ThreadPoolExecutor(max_workers=1) as pool:
        sent = pool.submit(refused).result()
    return ticket, ReviewDocument(
        workflow="rejected_boundary",
        run_id="run-1",
        request_id="req-1",
        inputs={
            "reviewed_rejection": reviewed_rejection_to_proto(review(stack, sent)),
            "corrective_provider": CORRECTIVE,
        },
    )


def choose(page: Page, text: str) -> None:
    page.get_by_label("Review document (JSON file)").set_input_files(
        files=[{"name": "review.json", "mimeType": "application/json", "buffer": text.encode()}]
    )


def open_review(page: Page, gateway: RunningGateway, document: ReviewDocument) -> None:
    open_run(page, gateway, "run-1", ADMIN_OPERATOR)
    page.get_by_role("button", name="Check current admission").click()
    choose(page, review_document.write(document))
    page.get_by_role("button", name="Review provider rejection").click()


def test_a_reviewed_provider_refusal_requeues_the_same_request(
    page: Page, gateway: RunningGateway, stack: Stack
) -> None:
    ticket, document = refused_review(stack)
    open_review(page, gateway, document)
    requeue = page.get_by_role("button", name="Requeue existing task")
    for label in ACKNOWLEDGEMENTS.values():
        expect(requeue).to_be_disabled()
        page.get_by_label(label).check()
    expect(requeue).to_be_enabled()
    assert_every_control_labelled(page)
    screenshot(page, gateway, "refusal-review-desktop")
    requeue.click()
    receipt = page.locator('[data-receipt="queued"]')
    expect(receipt).to_contain_text("Continuation queued")
    expect(receipt).to_contain_text("rejected boundary")

    with gateway.client("reader-token") as client:
        reply = client.get(
            "/api/v1/runs/run-1/invalid-read-continuity/requests/req-1/rejected-boundary-recovery"
        )
    assert reply.status_code == 200, reply.text
    outcome = reply.json()["outcome"]
    assert outcome["execution_request"]["execution_request_id"] == (
        ticket.execution_request.execution_request_id
    )
    assert outcome["execution_request"]["state"] == "EXECUTION_REQUEST_STATE_QUEUED"
    expect(receipt).to_contain_text(outcome["recovery_id"])


def test_the_console_downloads_the_review_and_the_cli_admits_from_it(
    page: Page, gateway: RunningGateway, stack: Stack, tmp_path: Path
) -> None:
    _, document = refused_review(stack)
    open_review(page, gateway, document)
    for label in ACKNOWLEDGEMENTS.values():
        page.get_by_label(label).check()
    with page.expect_download() as download:
        page.get_by_role("button", name="Download review document").click()
    path = tmp_path / download.value.suggested_filename
    download.value.save_as(path)
    assert path.name == "review-run-1-req-1-rejected_boundary.json"
    # The console's document is the one shape: the reader takes it, nothing lost or added.
    shown = page.locator(".recovery-review").get_by_text("sha256:").first.inner_text()
    downloaded = review_document.read(path.read_text(encoding="utf-8"))
    assert downloaded == ReviewDocument(
        workflow="rejected_boundary",
        run_id="run-1",
        request_id="req-1",
        inputs=document.inputs,
        candidate_digest=shown,
        acknowledgements=frozenset(ACKNOWLEDGEMENTS),
    )
    # The CLI admits from it: its digest and acknowledgements are the submission's.
    code = main(
        [
            *("--token", ADMIN_OPERATOR, "--ledger", stack.ledger.target),
            *("--candidate", stack.candidate.target, "--admission", stack.admission.target),
            *("refusal", "submit", "run-1", "req-1", "rec-cli", "--review", str(path)),
            *("--valid-for-seconds", "600"),
        ],
        env={},
    )
    assert code == 0
    with gateway.client("reader-token") as client:
        reply = client.get(
            "/api/v1/runs/run-1/invalid-read-continuity/requests/req-1/rejected-boundary-recovery"
        )
    assert reply.status_code == 200, reply.text
    assert reply.json()["outcome"]["recovery_id"] == "rec-cli"


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        (
            lambda held: held["inputs"],
            "this is an unversioned review document: this console reads "
            "forge.continuity.review/1 only",
        ),
        (
            lambda held: {**held, "format": "forge.continuity.review/2"},
            'review document format "forge.continuity.review/2"',
        ),
        (
            lambda held: {**held, "request_id": "req-2"},
            "it reviews rejected_boundary of run run-1 request req-2, not rejected_boundary "
            "of run run-1 request req-1",
        ),
    ],
)
def test_another_shape_is_refused_naming_the_version(
    page: Page,
    gateway: RunningGateway,
    stack: Stack,
    shape: Callable[[dict[str, Any]], object],
    message: str,
) -> None:
    _, document = refused_review(stack)
    open_run(page, gateway, "run-1", ADMIN_OPERATOR)
    page.get_by_role("button", name="Check current admission").click()
    choose(page, json.dumps(shape(json.loads(review_document.write(document)))))
    expect(page.get_by_role("alert")).to_contain_text(message)
    expect(page.get_by_role("button", name="Review provider rejection")).to_have_count(0)
