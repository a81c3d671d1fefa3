"""The never-claimed recovery through the console, in a real browser against real services."""

from __future__ import annotations

import json
from typing import Any

from playwright.sync_api import Page, Route, expect

from tests.console.conftest import (
    ADMIN_OPERATOR,
    PHONE,
    assert_every_control_labelled,
    fail_unclaimed,
    failed_unclaimed,
    open_run,
    screenshot,
)
from tests.gateway.conftest import RunningGateway, enable_policy

ACKNOWLEDGEMENTS = [
    "No worker ever claimed this ticket.",
    "The original request and attempt remain the same.",
    "The original consumption and budgets stay charged.",
    "Only the same-attempt ownership lease is renewed.",
]


def saved_recovery(gateway: RunningGateway, run_id: str) -> dict[str, Any]:
    with gateway.client("reader-token") as client:
        reply = client.get(
            f"/api/v1/runs/{run_id}/invalid-read-continuity/requests/{run_id}-request-1/recovery"
        )
    assert reply.status_code == 200, reply.text
    outcome: dict[str, Any] = reply.json()["outcome"]
    return outcome


def saved_actions(page: Page) -> list[dict[str, Any]]:
    raw = page.evaluate(
        "Object.keys(sessionStorage).filter(k => k.startsWith('forge.console.action:'))"
        ".map(k => sessionStorage.getItem(k))"
    )
    return [json.loads(item) for item in raw]


def test_review_failed_admission_requeues_the_same_request(
    page: Page, gateway: RunningGateway
) -> None:
    run_id = "run-console-review"
    failed = failed_unclaimed(gateway, run_id)
    open_run(page, gateway, run_id, ADMIN_OPERATOR)
    expect(page.locator("#command-ledger")).to_have_text("11 of 22 commands used")
    expect(page.get_by_role("button", name="Review failed admission")).to_have_count(0)

    page.get_by_role("button", name="Check current admission").click()
    ticket = page.locator(f'[data-ticket="{run_id}-request-1"]')
    expect(ticket).to_contain_text("failed")
    rows_before = gateway.rows()
    page.get_by_role("button", name="Review failed admission").click()
    review = page.locator('.recovery-review[data-workflow="never_claimed"]')
    expect(review).to_contain_text(failed["attempt_id"])
    expect(review).to_contain_text("11 of 22 commands used")
    # The digest is carried by the page: shown, never an input the operator types into.
    expect(review.locator("input:not([type=checkbox])")).to_have_count(0)
    assert gateway.rows() == rows_before, "reviewing queues nothing"
    action = saved_actions(page)[0]
    assert action["state"] == "reviewing" and action["id"].startswith("console-")

    requeue = page.get_by_role("button", name="Requeue existing task")
    for label in ACKNOWLEDGEMENTS:
        expect(requeue).to_be_disabled()
        page.get_by_label(label).check()
    expect(requeue).to_be_enabled()
    page.get_by_label(ACKNOWLEDGEMENTS[0]).uncheck()
    expect(requeue).to_be_disabled()
    page.get_by_label(ACKNOWLEDGEMENTS[0]).check()
    assert_every_control_labelled(page)
    screenshot(page, gateway, "review-desktop")
    page.set_viewport_size(PHONE)
    screenshot(page, gateway, "review-phone")

    requeue.click()
    receipt = page.locator('[data-receipt="queued"]')
    expect(receipt).to_contain_text("Continuation queued")
    expect(receipt).to_contain_text("admission only")
    expect(receipt.get_by_role("link", name="worker records")).to_be_visible()
    expect(receipt.get_by_role("link", name="command records")).to_be_visible()
    expect(receipt.get_by_role("link", name="journal records")).to_be_visible()
    # The recovery's new lease is explained by the bounds the ledger stored with the outcome.
    expect(receipt.locator("[data-lease-bounds]")).to_contain_text("(requested ")
    screenshot(page, gateway, "receipt-phone")
    page.set_viewport_size({"width": 1280, "height": 900})
    screenshot(page, gateway, "receipt-desktop")

    outcome = saved_recovery(gateway, run_id)
    assert outcome["recovery_id"] == action["id"], "the identity chosen before submission"
    requeued = outcome["execution_request"]
    assert requeued["execution_request_id"] == failed["execution_request_id"]
    assert requeued["attempt_id"] == failed["attempt_id"]
    assert requeued["state"] == "EXECUTION_REQUEST_STATE_QUEUED"
    expect(page.locator("#command-usage")).to_have_text("11 of 22 commands used")
    expect(page.get_by_role("button", name="Requeue existing task")).to_have_count(0)
    # The ticket card above the receipt follows the records: queued now, not failed.
    expect(ticket.locator("dt:text-is('Current state') + dd")).to_have_text("queued")

    # Checking again shows the saved recovery, and offers nothing.
    page.get_by_role("button", name="Check current admission").click()
    expect(page.locator('[data-receipt="queued"]')).to_contain_text(action["id"])
    expect(page.get_by_role("button", name="Review failed admission")).to_have_count(0)

    # The requeued request fails again: its receipt, read back, no longer says only "queued".
    fail_unclaimed(gateway, requeued["execution_request_id"])
    page.get_by_role("button", name="Check current admission").click()
    expect(page.locator('[data-receipt="queued"] h4')).to_contain_text(
        "Continuation queued · now failed"
    )


def test_a_lost_response_is_read_back_and_never_resubmitted(
    page: Page, gateway: RunningGateway
) -> None:
    run_id = "run-console-lost"
    failed_unclaimed(gateway, run_id)
    posts: list[str] = []

    def lose_the_answer(route: Route) -> None:
        posts.append(route.request.url)
        route.fetch()  # the gateway and the services act on it ...
        route.abort("connectionreset")  # ... and the answer never reaches the page

    page.route("**/recoveries/**", lose_the_answer)
    open_run(page, gateway, run_id, ADMIN_OPERATOR)
    page.get_by_role("button", name="Check current admission").click()
    page.get_by_role("button", name="Review failed admission").click()
    for label in ACKNOWLEDGEMENTS:
        page.get_by_label(label).check()
    page.get_by_role("button", name="Requeue existing task").click()

    receipt = page.locator('[data-receipt="queued"]')
    expect(receipt).to_contain_text("Continuation queued")
    action = saved_actions(page)[0]
    expect(receipt).to_contain_text(action["id"])
    assert action["state"] == "done"
    assert len(posts) == 1
    assert saved_recovery(gateway, run_id)["recovery_id"] == action["id"]

    # After a reload, checking the admission shows the saved action and offers no submission.
    page.reload()
    page.get_by_role("button", name="Check current admission").click()
    expect(page.locator('[data-receipt="queued"]')).to_contain_text(action["id"])
    expect(page.get_by_role("button", name="Requeue existing task")).to_have_count(0)
    expect(page.get_by_role("button", name="Review failed admission")).to_have_count(0)
    assert len(posts) == 1


def test_an_unanswered_submission_is_never_offered_again(
    page: Page, gateway: RunningGateway
) -> None:
    """The request never reaches the services: the read-back finds nothing, and the page offers
    only another read-back, never a second submission."""
    run_id = "run-console-unknown"
    failed_unclaimed(gateway, run_id)
    posts: list[str] = []

    def drop(route: Route) -> None:
        posts.append(route.request.url)
        route.abort("timedout")

    page.route("**/recoveries/**", drop)
    open_run(page, gateway, run_id, ADMIN_OPERATOR)
    page.get_by_role("button", name="Check current admission").click()
    page.get_by_role("button", name="Review failed admission").click()
    for label in ACKNOWLEDGEMENTS:
        page.get_by_label(label).check()
    page.get_by_role("button", name="Requeue existing task").click()

    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Outcome not yet known")
    expect(alert).to_contain_text("will not submit again")
    expect(page.get_by_role("button", name="Requeue existing task")).to_have_count(0)
    page.get_by_role("button", name="Read back saved action").click()
    expect(page.get_by_role("alert")).to_contain_text("Outcome not yet known")
    page.reload()
    expect(page.get_by_role("alert")).to_contain_text("Outcome not yet known")
    expect(page.get_by_role("button", name="Review failed admission")).to_have_count(0)
    expect(page.get_by_role("button", name="Requeue existing task")).to_have_count(0)
    assert len(posts) == 1


def test_callers_without_the_authority_see_no_action(page: Page, gateway: RunningGateway) -> None:
    run_id = "run-console-unauthorized"
    failed_unclaimed(gateway, run_id)
    rows = gateway.rows()
    # An execution operator without administrator authority: the permissions read says so, and
    # the administrators' recovery candidate is not even asked for.
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url))
    open_run(page, gateway, run_id, "operator-token")
    page.get_by_role("button", name="Check current admission").click()
    expect(page.locator(f'[data-ticket="{run_id}-request-1"]')).to_contain_text(
        "needs current factory administrator authority"
    )
    expect(page.get_by_role("button", name="Review failed admission")).to_have_count(0)
    assert any(url.endswith("/api/v1/caller/permissions") for url in sent)
    assert not any(url.endswith("/recovery-candidate") for url in sent)
    screenshot(page, gateway, "unauthorized-desktop")

    # An administrator who is not the ticket's original operator: held, with the server's hold.
    page.get_by_role("button", name="Forget token").click()
    open_run(page, gateway, run_id, "admin-token")
    page.get_by_role("button", name="Check current admission").click()
    expect(page.locator(f'[data-ticket="{run_id}-request-1"]')).to_contain_text("held")
    expect(page.get_by_role("button", name="Review failed admission")).to_have_count(0)
    assert gateway.rows() == rows


def test_a_definite_refusal_is_shown_and_writes_nothing(
    page: Page, gateway: RunningGateway
) -> None:
    """The candidate changes between review and submission: the services refuse, the page shows
    the reason, nothing is written, and a new review is needed."""
    run_id = "run-console-stale"
    failed_unclaimed(gateway, run_id)
    open_run(page, gateway, run_id, ADMIN_OPERATOR)
    page.get_by_role("button", name="Check current admission").click()
    page.get_by_role("button", name="Review failed admission").click()
    for label in ACKNOWLEDGEMENTS:
        page.get_by_label(label).check()
    enable_policy(gateway)  # a new policy revision: the reviewed candidate is no longer current
    rows = gateway.rows()
    page.get_by_role("button", name="Requeue existing task").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Refused; nothing was recorded")
    expect(alert).to_contain_text("CANDIDATE_DIGEST_STALE")
    expect(page.get_by_role("button", name="Requeue existing task")).to_have_count(0)
    assert gateway.rows() == rows
    assert saved_actions(page)[0]["state"] == "refused"
    with gateway.client("reader-token") as client:
        missing = client.get(
            f"/api/v1/runs/{run_id}/invalid-read-continuity/requests/{run_id}-request-1/recovery"
        )
    assert missing.status_code == 404
