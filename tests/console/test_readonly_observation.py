"""The read-only observation recovery through the console. The console writes no workflow of its
own: it learns this one from the services' description of the recovery workflows, so the flow
the registry routes appears here without a console change."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from playwright.sync_api import Page, Route, expect

from services.demo.provider import RefusingProvider
from tests.admission.conftest import Stack
from tests.console.conftest import (
    ADMIN_OPERATOR,
    PHONE,
    assert_every_control_labelled,
    open_run,
    screenshot,
)
from tests.gateway.conftest import RunningGateway
from tests.recovery.test_readonly_observation import consumed, refusal_recovered

ACKNOWLEDGEMENTS = [
    "The evidence observation stays unavailable; its original result is not known.",
    "No original tool callback is replayed.",
    "The same request, attempt and budgets continue; original usage stays charged.",
    "Only a finite ownership lease for the same attempt is granted.",
]
RECOVERY = "/api/v1/runs/run-1/invalid-read-continuity/requests/req-1/readonly-observation-recovery"


def held_turn(stack: Stack) -> dict[str, Any]:
    """A refused first request recovered once, then a consumed turn whose evidence read was not
    retained, failed under the second claim; the ticket's execution request."""

    def build() -> dict[str, Any]:
        with RefusingProvider() as provider:
            ticket, sent = refusal_recovered(stack, provider)
        consumed(stack, ticket, sent)
        return {
            "execution_request_id": ticket.execution_request.execution_request_id,
            "checkpoint_digest": ticket.execution_request.checkpoint_digest,
        }

    # The SDK runs its own event loop; Playwright's synchronous API holds this thread's loop.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(build).result()


def saved_actions(page: Page) -> list[dict[str, Any]]:
    raw = page.evaluate(
        "Object.keys(sessionStorage).filter(k => k.startsWith('forge.console.action:'))"
        ".map(k => sessionStorage.getItem(k))"
    )
    return [json.loads(item) for item in raw]


def test_an_unavailable_observation_continues_the_same_request_once(
    page: Page, gateway: RunningGateway, stack: Stack
) -> None:
    original = held_turn(stack)
    posts: list[str] = []

    def lose_the_answer(route: Route) -> None:
        posts.append(route.request.url)
        route.fetch()  # the services act on it ...
        route.abort("connectionreset")  # ... and the answer never reaches the page

    page.route("**/readonly-observation-recoveries/**", lose_the_answer)
    open_run(page, gateway, "run-1", ADMIN_OPERATOR)
    with gateway.client("reader-token") as client:
        counted = client.get("/api/v1/runs/run-1/command-usage").json()["usage"]
    usage = f"{counted['used']} of {counted['limit']} commands used"
    expect(page.locator("#command-usage")).to_have_text(usage)
    page.get_by_role("button", name="Check current admission").click()

    ticket = page.locator('[data-ticket="req-1"]')
    # The provider-refusal recovery saved earlier shows as its receipt and is not offered again.
    expect(ticket.locator('[data-receipt="queued"]')).to_contain_text("rejected boundary")
    section = ticket.locator('.recovery[data-workflow="readonly_observation"]')
    expect(section).to_contain_text("Unavailable read-only observation")
    expect(section).to_contain_text("eligible")
    expect(page.get_by_role("button", name="Review provider rejection")).to_have_count(0)
    expect(page.get_by_label("Review document (JSON file)")).to_have_count(0)
    expect(page.get_by_role("button", name="Review failed admission")).to_have_count(0)
    rows_before = gateway.rows()

    page.get_by_role("button", name="Review unavailable observation").click()
    review = page.locator('.recovery-review[data-workflow="readonly_observation"]')
    expect(review).to_contain_text(original["execution_request_id"])
    expect(review.locator("input:not([type=checkbox])")).to_have_count(0)
    assert gateway.rows() == rows_before, "reviewing queues nothing"
    [action] = [a for a in saved_actions(page) if a["state"] == "reviewing"]
    requeue = page.get_by_role("button", name="Requeue existing task")
    for label in ACKNOWLEDGEMENTS:
        expect(requeue).to_be_disabled()
        page.get_by_label(label).check()
    expect(requeue).to_be_enabled()
    assert_every_control_labelled(page)
    screenshot(page, gateway, "observation-review-desktop")
    page.set_viewport_size(PHONE)
    screenshot(page, gateway, "observation-review-phone")
    page.set_viewport_size({"width": 1280, "height": 900})
    requeue.click()

    # The answer was lost: the page reads the saved action back, never submits again.
    receipt = review.locator('[data-receipt="queued"]')
    expect(receipt).to_contain_text("Continuation queued")
    expect(receipt).to_contain_text("readonly observation")
    expect(receipt).to_contain_text(action["id"])
    assert len(posts) == 1
    with gateway.client("reader-token") as client:
        reply = client.get(RECOVERY)
    assert reply.status_code == 200, reply.text
    outcome = reply.json()["outcome"]
    assert outcome["recovery_id"] == action["id"], "the identity chosen before submission"
    requeued = outcome["execution_request"]
    assert requeued["execution_request_id"] == original["execution_request_id"]
    assert requeued["state"] == "EXECUTION_REQUEST_STATE_QUEUED"
    assert requeued["checkpoint_digest"] == outcome["derived_checkpoint_digest"]
    assert requeued["checkpoint_digest"] != original["checkpoint_digest"]
    expect(page.locator("#command-usage")).to_have_text(usage)  # no command charged

    # Checking again shows both saved recoveries, and offers nothing.
    page.reload()
    page.get_by_role("button", name="Check current admission").click()
    expect(ticket.locator('[data-receipt="queued"]')).to_have_count(2)
    expect(ticket).to_contain_text(action["id"])
    expect(page.get_by_role("button", name="Review unavailable observation")).to_have_count(0)
    expect(page.get_by_role("button", name="Requeue existing task")).to_have_count(0)
    assert len(posts) == 1
