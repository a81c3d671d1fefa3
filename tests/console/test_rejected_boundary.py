"""The provider-refusal (rejected-boundary) recovery through the console: the administrator's
review document is chosen as a file, the server computes the candidate, and the same review
pattern (four acknowledgements, one kept action identity) follows."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from google.protobuf.json_format import MessageToDict
from playwright.sync_api import Page, expect

from services.demo.provider import RefusingProvider, SentRequest
from shared.contract.recovery_proto import reviewed_rejection_to_proto
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

ACKNOWLEDGEMENTS = [
    "The provider refused this request at the reviewed provider epoch, before admitting it.",
    "No model response and no tool callback is replayed.",
    "The same request, attempt and budgets continue; original usage stays charged.",
    "Only a finite ownership lease for the same attempt is granted.",
]


def test_a_reviewed_provider_refusal_requeues_the_same_request(
    page: Page, gateway: RunningGateway, stack: Stack
) -> None:
    ticket = admit_enabled(stack)

    def refused() -> SentRequest:
        with RefusingProvider() as provider:
            return refused_at_provider(stack, ticket, provider)

    # The SDK runs its own event loop; Playwright's synchronous API holds this thread's loop.
    with ThreadPoolExecutor(max_workers=1) as pool:
        sent = pool.submit(refused).result()
    document = {
        "reviewed_rejection": MessageToDict(
            reviewed_rejection_to_proto(review(stack, sent)), preserving_proto_field_name=True
        ),
        "corrective_provider": MessageToDict(CORRECTIVE, preserving_proto_field_name=True),
    }
    open_run(page, gateway, "run-1", ADMIN_OPERATOR)
    page.get_by_role("button", name="Check current admission").click()
    page.get_by_label("Review document (JSON file)").set_input_files(
        files=[
            {
                "name": "review.json",
                "mimeType": "application/json",
                "buffer": json.dumps(document).encode(),
            }
        ]
    )
    page.get_by_role("button", name="Review provider rejection").click()
    requeue = page.get_by_role("button", name="Requeue existing task")
    for label in ACKNOWLEDGEMENTS:
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
