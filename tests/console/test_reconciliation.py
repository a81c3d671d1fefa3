"""Reconciliation through the console (ADR 0010, ADR 0012): the reference worker, its own
process, waits on a slow provider holding generation 1; the administrator inspects the claimed
request, the deployment's local-process verifier proves nothing while the worker lives and
proves cessation once it is killed (SIGKILL), and one reviewed decision retries the stage, its
answer lost and read back. MARK_UNRESOLVED on a request claimed through the real claim route
shows the handoff after the decision and a summary that says what the run is."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect
from sqlalchemy import Engine

from services.demo.continuation import COMMANDS, start_reference_worker, worker_environment
from services.demo.scripted_provider import HeldTurn, ScriptedProvider, reference_script
from services.ledger.local_process_verifier import LocalProcessVerifier
from services.ledger.service import Ledger
from tests.admission.conftest import Stack
from tests.console.conftest import ADMIN_OPERATOR, admitted, fail_unclaimed, open_run, screenshot
from tests.console.test_what_ran import WORKER_SECONDS, assert_no_sideways_scroll, worker_env
from tests.gateway.conftest import RunningGateway
from tests.recovery.conftest import Authority

#: The answer the provider holds back: the worker has claimed, read, listed and run one command.
HELD_TURN = 4


@pytest.fixture
def ledger(engine: Engine) -> Ledger:
    """The ledger as `make run` configures it: the local-process verifier, on this host."""
    return Ledger(engine, authority=Authority(), verifier=LocalProcessVerifier())


def saved_actions(page: Page) -> list[dict[str, Any]]:
    raw = page.evaluate(
        "Object.keys(sessionStorage).filter(k => k.startsWith('forge.console.action:'))"
        ".map(k => sessionStorage.getItem(k))"
    )
    return [json.loads(item) for item in raw]


def saved_decision(gateway: RunningGateway, run_id: str, exr: str) -> dict[str, Any]:
    with gateway.client("reader-token") as client:
        reply = client.get(f"/api/v1/runs/{run_id}/execution-requests/{exr}/reconciliation")
    assert reply.status_code == 200, reply.text
    decided: dict[str, Any] = reply.json()["reconciliation"]
    return decided


@pytest.fixture
def held_worker(stack: Stack) -> Iterator[tuple[HeldTurn, Any]]:
    """A provider that holds turn ``HELD_TURN`` back, and a way to start the worker on it."""
    held = HeldTurn(reference_script(COMMANDS), at=HELD_TURN, hold_seconds=WORKER_SECONDS)
    with (
        ScriptedProvider(held) as provider,
        worker_environment(stack.ledger.target, "worker-token", provider) as env,
    ):
        started: list[Any] = []

        def start(run_id: str) -> Any:
            started.append(start_reference_worker(worker_env(env), run_id))
            return started[-1]

        try:
            yield held, start
        finally:
            held.released.set()
            for process in started:
                if process.poll() is None:
                    process.kill()
                process.communicate(timeout=30)


def test_a_lost_worker_is_verified_and_its_stage_retried_once(
    page: Page, gateway: RunningGateway, held_worker: tuple[HeldTurn, Any]
) -> None:
    run_id = "run-console-reconcile"
    held, start = held_worker
    queued = admitted(gateway, run_id)
    exr = queued["execution_request_id"]
    process = start(run_id)
    assert held.wait(WORKER_SECONDS), "the worker reached the held turn"

    posts: list[str] = []

    def lose_the_answer(route: Route) -> None:
        if route.request.method == "POST" and "/verifications" not in route.request.url:
            posts.append(route.request.url)
            route.fetch()  # the ledger decides ...
            route.abort("connectionreset")  # ... and the answer never reaches the page
        else:
            route.continue_()

    page.route("**/reconciliations/**", lose_the_answer)
    open_run(page, gateway, run_id, ADMIN_OPERATOR)
    timeline = page.locator("#timeline")
    expect(timeline.locator('li[data-kind="command_executed"]')).to_have_count(1)
    expect(page.locator("#timeline-lease")).to_contain_text("left of")
    expect(page.locator("#continuity-state")).to_contain_text("claimed by a worker")

    page.get_by_role("button", name="Check current admission").click()
    ticket = page.locator(f'[data-ticket="{run_id}-request-1"]')
    expect(ticket).to_contain_text("If its worker was lost, reconcile it below.")
    page.get_by_role("button", name="Inspect for reconciliation").click()
    section = page.locator(f'[data-reconciliation="{exr}"]')
    expect(section).to_contain_text("Reconciliation digest")
    expect(section).to_contain_text("12 of 22 commands used")
    expect(section).to_contain_text("reconciliation not verified")
    (action,) = saved_actions(page)
    expect(section).to_contain_text(action["id"])  # chosen when the inspection opened
    # Nothing proven: the retry is not offered; verifying and marking unresolved are.
    expect(page.get_by_role("button", name="Review retry stage")).to_have_count(0)
    expect(page.get_by_role("button", name="Review mark unresolved")).to_be_visible()

    evidence = page.get_by_label("Evidence reference")
    evidence.fill(f"incident: worker pid {process.pid} unresponsive")
    page.get_by_role("button", name="Ask the verifier").click()
    refusal = section.get_by_role("alert")
    expect(refusal).to_contain_text("Not verified; nothing was recorded")
    expect(refusal).to_contain_text("RECONCILIATION_NOT_VERIFIED")
    screenshot(page, gateway, "reconciliation-not-verified")

    process.kill()  # SIGKILL: the owner of generation 1 is gone
    process.wait(timeout=30)
    evidence.fill(f"incident: worker pid {process.pid} killed")
    page.get_by_role("button", name="Ask the verifier").click()
    expect(section.locator('[data-receipt="verification"]')).to_contain_text("local-process")
    expect(section.locator(".verification")).to_contain_text("cessation verified")
    expect(timeline.locator('li[data-kind="reconciliation_verification"]')).to_have_count(1)

    page.get_by_role("button", name="Review retry stage").click()
    review = page.locator('[data-decision="retry_stage"]')
    expect(review).to_contain_text(action["id"])
    expect(review).to_contain_text("Expected lease generation1")
    page.get_by_role("button", name="Retry stage").click()

    receipt = page.locator('[data-receipt="reconciliation"]')
    expect(receipt).to_contain_text("Stage queued again by reconciliation")
    expect(receipt).to_contain_text(action["id"])
    expect(receipt).to_contain_text("Handoff after the decision")
    assert len(posts) == 1, "one submission; the lost answer was read back"
    decided = saved_decision(gateway, run_id, exr)
    assert decided["reconciliation_id"] == action["id"]
    retry = decided["retry_request"]["execution_request_id"]
    expect(receipt).to_contain_text(retry)
    expect(timeline.locator('li[data-kind="reconciliation_settlement"]')).to_contain_text(
        "retry stage"
    )
    expect(timeline).to_contain_text("Stage queued again by reconciliation")
    expect(page.locator("#timeline-state")).to_contain_text(retry)
    expect(page.locator("#continuity-state")).to_contain_text("admitted: queued for a worker")
    screenshot(page, gateway, "reconciliation-retried")
    assert_no_sideways_scroll(page)
    screenshot(page, gateway, "reconciliation-retried-phone")

    # A reload reads the saved decision back; nothing is offered again.
    page.reload()
    page.get_by_role("button", name="Check current admission").click()
    expect(page.locator('[data-receipt="reconciliation"]')).to_contain_text(action["id"])
    expect(page.get_by_role("button", name="Inspect for reconciliation")).to_have_count(0)
    assert len(posts) == 1

    # Once the retry is no longer queued, the receipt read back does not call it queued.
    fail_unclaimed(gateway, retry)
    page.get_by_role("button", name="Check current admission").click()
    expect(page.locator('[data-receipt="reconciliation"]')).to_contain_text(
        "The retry was queued and is now failed"
    )


def claimed(gateway: RunningGateway, run_id: str) -> dict[str, Any]:
    """An admitted request claimed through the real claim route, as a worker claims it."""
    queued = admitted(gateway, run_id)
    with gateway.client("reader-token") as reader:
        run = reader.get(f"/api/v1/runs/{run_id}").json()["run"]
    with gateway.client("worker-token") as client:
        reply = client.post(
            f"/api/v1/execution-requests/{queued['execution_request_id']}:claim",
            json={
                key: run[key]
                for key in (
                    "attempt_id",
                    "source_revision",
                    "configuration_digest",
                    "source_profile",
                )
            },
        )
    assert reply.status_code == 200, reply.text
    owned: dict[str, Any] = reply.json()["execution_request"]
    assert owned["state"] == "EXECUTION_REQUEST_STATE_CLAIMED"
    return owned


def test_mark_unresolved_shows_the_handoff_and_an_honest_summary(
    page: Page, gateway: RunningGateway
) -> None:
    run_id = "run-console-unresolved"
    owned = claimed(gateway, run_id)
    exr = owned["execution_request_id"]

    # A reader may inspect (read-only) and is offered no decision.
    open_run(page, gateway, run_id, "reader-token")
    page.get_by_role("button", name="Check current admission").click()
    page.get_by_role("button", name="Inspect for reconciliation").click()
    section = page.locator(f'[data-reconciliation="{exr}"]')
    expect(section).to_contain_text("need factory administrator authority")
    expect(page.get_by_role("button", name="Review mark unresolved")).to_have_count(0)

    page.evaluate("sessionStorage.clear()")
    open_run(page, gateway, run_id, ADMIN_OPERATOR)
    page.get_by_role("button", name="Check current admission").click()
    page.get_by_role("button", name="Inspect for reconciliation").click()
    # The default verifier proves nothing: a retry is held, marking unresolved is permitted.
    expect(page.get_by_role("button", name="Review retry stage")).to_have_count(0)
    page.get_by_role("button", name="Review mark unresolved").click()
    expect(section.get_by_role("alert")).to_contain_text("Enter the evidence reference")
    page.get_by_label("Evidence reference").fill("incident: worker host lost")
    page.get_by_role("button", name="Review mark unresolved").click()
    # Nothing proves the worker stopped: the claim is released only on the administrator's
    # acknowledgement that its cessation is unproven (ADR 0045), which the decision records.
    expect(page.get_by_role("button", name="Mark unresolved")).to_be_disabled()
    page.get_by_label(re.compile("No verification proves that the prior owner stopped")).check()
    page.get_by_role("button", name="Mark unresolved").click()

    receipt = page.locator('[data-receipt="reconciliation"]')
    expect(receipt).to_contain_text("Marked unresolved")
    expect(receipt).to_contain_text("unproven: the administrator released the claim")
    expect(receipt).to_contain_text("Handoff after the decision")
    (action,) = saved_actions(page)
    assert action["state"] == "done"
    decided = saved_decision(gateway, run_id, exr)
    assert decided["reconciliation_id"] == action["id"]
    assert decided["reconciled_request"]["state"] == "EXECUTION_REQUEST_STATE_UNRESOLVED"
    assert decided["cessation_unproven_acknowledged"] is True

    # The summary says what the run is, and the recovery section what applies.
    state = page.locator("#continuity-state")
    expect(state).to_contain_text("terminal unresolved by reconciliation")
    expect(state).not_to_contain_text(re.compile(r"(?<!was )held at"))  # history only
    expect(page.locator("#timeline")).to_contain_text("Reconciliation decided: mark unresolved")
    page.get_by_role("button", name="Check current admission").click()
    ticket = page.locator(f'[data-ticket="{run_id}-request-1"]')
    expect(ticket).to_contain_text(
        "No recovery or retry applies: the request is terminal unresolved"
    )
    expect(ticket).not_to_contain_text("the request has not failed")
    expect(ticket.locator('[data-receipt="reconciliation"]')).to_contain_text(action["id"])
    screenshot(page, gateway, "reconciliation-unresolved")
    assert_no_sideways_scroll(page)
    screenshot(page, gateway, "reconciliation-unresolved-phone")
