"""Following what ran, in the console: the execution record after admission as a live timeline
(the reference worker as its own process against the real services, its journal followed over
the gateway's stream route), the run's summary in each state, no action without a token, and no
page wider than a 390 px phone."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Locator, Page, expect

from services.demo.continuation import COMMANDS, start_reference_worker, worker_environment
from services.demo.scripted_provider import ScriptedProvider, reference_script
from services.runner import DEV_PRINCIPALS
from tests.admission.conftest import Stack
from tests.console.conftest import (
    ADMIN_OPERATOR,
    PHONE,
    admitted,
    assert_every_control_labelled,
    fail_unclaimed,
    failed_unclaimed,
    open_run,
    screenshot,
)
from tests.gateway.conftest import RunningGateway, enable_policy, seed

ROOT = Path(__file__).resolve().parents[2]
WORKER_SECONDS = 240


def worker_env(env: dict[str, str]) -> dict[str, str]:
    """The worker process imports the project and its generated code from this checkout."""
    return {**env, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'shared' / 'gen'}"}


def assert_no_sideways_scroll(page: Page) -> None:
    """At a 390 px viewport the document is no wider than the viewport."""
    page.set_viewport_size(PHONE)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{page.url} is {width} px wide at {PHONE['width']} px"


def kinds(page: Page) -> list[str]:
    events = page.locator("#timeline li.event")
    kinds: list[str] = events.evaluate_all("items => items.map(i => i.dataset.kind)")
    return kinds


def test_the_timeline_follows_a_real_worker_run_live(
    page: Page, gateway: RunningGateway, stack: Stack
) -> None:
    run_id = "run-console-live"
    queued = admitted(gateway, run_id)
    open_run(page, gateway, run_id, "reader-token")
    timeline = page.locator("#timeline")
    expect(page.locator("#timeline-live")).to_have_text("live")
    expect(timeline).to_contain_text("Admission settled")
    expect(timeline).to_contain_text("Ownership claim granted")
    expect(page.locator("#timeline-state")).to_contain_text("queued")
    expect(page.locator("#continuity-state")).to_contain_text("admitted: queued for a worker")
    expect(page.locator("#continuity-state")).to_contain_text("was held at journal #")
    expect(page.locator("#timeline-commands")).to_have_text("11 of 22 commands used")

    # The reference worker continues the run in its own process; the page is not touched.
    with (
        ScriptedProvider(reference_script(COMMANDS)) as provider,
        worker_environment(stack.ledger.target, "worker-token", provider) as env,
    ):
        process = start_reference_worker(worker_env(env), run_id)
        stdout, stderr = process.communicate(timeout=WORKER_SECONDS)
    assert process.returncode == 0, stdout + stderr

    # Everything the worker recorded arrives through the follow stream, in journal order.
    completed = timeline.locator('li[data-kind="request_event"]', has_text="completed")
    expect(completed).to_have_count(1)
    seen = kinds(page)
    claim = seen.index("worker_claimed")
    for kind in ("model_request_sent", "response_consumed", "tool_call_granted", "tool_outcome"):
        assert kind in seen[claim:], (kind, seen)
    commands = timeline.locator('li[data-kind="command_executed"]')
    expect(commands).to_have_count(2)
    expect(commands.nth(0)).to_contain_text("command 12 of 22")
    expect(commands.nth(1)).to_contain_text("command 13 of 22")
    assert seen[-1] == "request_event"
    expect(timeline.locator('li[data-kind="worker_claimed"]')).to_contain_text(
        queued["execution_request_id"]
    )
    # The facts follow the records read after the state-changing entries.
    expect(page.locator("#timeline-commands")).to_have_text("13 of 22 commands used")
    expect(page.locator("#timeline-lease")).to_contain_text("no live lease")
    expect(page.locator("#continuity-state")).to_contain_text("completed")
    expect(page.locator("#command-ledger")).to_have_text("13 of 22 commands used")
    screenshot(page, gateway, "timeline-completed")
    assert_no_sideways_scroll(page)
    screenshot(page, gateway, "timeline-completed-phone")


def seconds_left(lease: Locator) -> int:
    """The countdown the lease line shows ("h:mm:ss left of" or "m:ss left of"), in seconds."""
    found = re.search(r"(?:(\d+):)?(\d+):(\d\d) left of", lease.inner_text())
    assert found, lease.inner_text()
    hours, minutes, seconds = (int(g or 0) for g in found.groups())
    return hours * 3600 + minutes * 60 + seconds


def test_the_lease_counts_down_from_the_served_expiry(page: Page, gateway: RunningGateway) -> None:
    run_id = "run-console-lease"
    queued = admitted(gateway, run_id)
    page.clock.install()  # the page's clock, moved by the test: no waiting on real time
    open_run(page, gateway, run_id, "reader-token")
    lease = page.locator("#timeline-lease")
    expect(lease).to_contain_text(f"until {queued['lease']['expires_at']}")
    before = seconds_left(lease)
    assert 0 < before <= int(queued["lease"]["seconds"])
    page.clock.fast_forward("02:00")
    expect(lease).not_to_contain_text(re.compile(rf"\b{before // 60}:{before % 60:02d} left"))
    assert before - 125 <= seconds_left(lease) <= before - 120


@pytest.mark.parametrize("browser_off", [3600, -3600], ids=["browser-ahead", "browser-behind"])
def test_the_lease_counts_down_on_the_ledgers_clock_not_the_browsers(
    page: Page, gateway: RunningGateway, browser_off: int
) -> None:
    """An operator's laptop an hour off shows what the ledger would say is left of the lease:
    not "expired" an hour early, not more than the lease an hour late (ADR 0057)."""
    run_id = f"run-console-lease-{'ahead' if browser_off > 0 else 'behind'}"
    queued = admitted(gateway, run_id)
    expires = datetime.fromisoformat(queued["lease"]["expires_at"].replace("Z", "+00:00"))
    before = datetime.now(UTC)
    page.clock.install(time=before + timedelta(seconds=browser_off))
    open_run(page, gateway, run_id, "reader-token")
    lease = page.locator("#timeline-lease")
    expect(lease).to_contain_text(re.compile(r"\d:\d\d left of"))
    shown = seconds_left(lease)
    after = datetime.now(UTC)
    # never more than the ledger could say while the page was open; less by no more than the
    # listing's call took
    most, least = (expires - before).total_seconds(), (expires - after).total_seconds()
    assert least - 30 <= shown <= most, (shown, least, most)
    assert most < abs(browser_off)  # counted on the browser's clock, it would read wrong


def test_the_summary_says_what_the_run_is_in_each_state(
    page: Page, gateway: RunningGateway
) -> None:
    # Held, never admitted: the hold is the run's state.
    seed(gateway, "run-console-held")
    open_run(page, gateway, "run-console-held", "reader-token")
    state = page.locator("#continuity-state")
    expect(state).to_contain_text(re.compile(r"^held at journal #\d+; not admitted$"))
    expect(page.locator("#timeline")).to_contain_text("Nothing has run after admission yet.")
    assert_no_sideways_scroll(page)
    screenshot(page, gateway, "run-held-phone")

    # Failed before any claim: failed, not held; the recovery section says what applies.
    failed_unclaimed(gateway, "run-console-failed")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.evaluate("sessionStorage.clear()")  # another operator's token
    open_run(page, gateway, "run-console-failed", ADMIN_OPERATOR)
    expect(state).to_contain_text("failed")
    expect(state).not_to_contain_text(re.compile(r"(?<!was )held at"))
    expect(page.locator("#timeline")).to_contain_text("Execution request failed")
    absent: list[str] = []
    page.on("response", lambda r: absent.append(r.url) if r.status == 404 else None)
    page.get_by_role("button", name="Check current admission").click()
    expect(page.locator('[data-ticket="run-console-failed-request-1"]')).to_be_visible()
    expect(page.get_by_role("button", name="Review failed admission")).to_be_visible()
    # No recovery was saved: none is probed for (each absent read-back answered a 404).
    assert absent == [], absent
    assert_no_sideways_scroll(page)
    screenshot(page, gateway, "run-failed-phone")


def test_without_a_token_the_run_page_offers_no_action(page: Page, gateway: RunningGateway) -> None:
    seed(gateway, "run-console-no-token")
    page.goto(f"{gateway.url}/console/runs/run-console-no-token")
    expect(page.get_by_label("Bearer token")).to_be_visible()
    visible = page.locator("main button:visible").evaluate_all("b => b.map(x => x.textContent)")
    assert visible == ["Use token"]
    # The token box says which role each action needs and which development token holds it
    # (checked against the principals `make run` writes), and the page links back to the runs.
    hints = page.locator("#role-hints li").evaluate_all(
        "items => items.map(i => [i.dataset.role, i.dataset.token, i.textContent])"
    )
    assert len(hints) == 4
    for roles, dev_token, text in hints:
        assert dev_token in text
        assert set(roles.split()) <= set(DEV_PRINCIPALS[dev_token][1]), (roles, dev_token)
    expect(page.get_by_role("link", name="All runs")).to_have_attribute("href", "/console/")
    expect(page.get_by_role("button", name="Forget token")).to_be_hidden()
    assert_no_sideways_scroll(page)
    page.goto(f"{gateway.url}/console/")
    assert_no_sideways_scroll(page)
    assert_every_control_labelled(page)


def test_the_admission_review_labels_its_four_digests(page: Page, gateway: RunningGateway) -> None:
    run_id = "run-console-digests"
    seed(gateway, run_id)
    enable_policy(gateway)
    with gateway.client("operator-token") as client:
        reply = client.get(f"/api/v1/runs/{run_id}/invalid-read-continuity/candidate")
    digests = reply.json()["candidate"]["digests"]
    page.set_viewport_size(PHONE)
    open_run(page, gateway, run_id, "operator-token")
    page.get_by_role("button", name="Check current admission").click()
    page.get_by_role("button", name="Review admission (version 1)").click()
    review = page.locator(".card", has=page.get_by_role("heading", name="Review admission")).last
    for label, field in (
        ("Candidate digest", "candidate_digest"),
        ("Run digest", "run_digest"),
        ("Journal digest", "journal_digest"),
        ("Policy digest", "policy_digest"),
    ):
        value = review.locator(f'dt:text-is("{label}") + dd')
        expect(value).to_have_text(digests[field])
    assert_no_sideways_scroll(page)
    screenshot(page, gateway, "admission-review-phone")


def test_a_hidden_tab_lets_the_stream_go_and_follows_again_from_the_next_entry(
    page: Page, gateway: RunningGateway
) -> None:
    run_id = "run-console-hidden"
    queued = admitted(gateway, run_id)
    streams: list[str] = []
    page.on("request", lambda r: streams.append(r.url) if "journal:stream" in r.url else None)
    open_run(page, gateway, run_id, "reader-token")
    live = page.locator("#timeline-live")
    expect(live).to_have_text("live")
    claim = page.locator('#timeline li[data-kind="ownership_claim"]')
    expect(claim).to_have_count(1)
    shown = page.locator("#timeline li.event").count()
    head = int(claim.get_attribute("data-sequence") or 0)

    def visibility(state: str) -> None:
        page.evaluate(
            "state => { Object.defineProperty(document, 'visibilityState',"
            " { value: state, configurable: true });"
            " document.dispatchEvent(new Event('visibilitychange')); }",
            state,
        )

    visibility("hidden")
    expect(live).to_have_text("paused while the tab is hidden")
    fail_unclaimed(gateway, queued["execution_request_id"])
    visibility("visible")
    expect(live).to_have_text("live")
    failed = page.locator('#timeline li[data-kind="request_failed"]')
    expect(failed).to_have_count(1)
    expect(page.locator("#timeline li.event")).to_have_count(shown + 1)  # nothing shown twice
    # Both follows ask for batches; the second starts after the newest entry the first showed.
    assert [parse_qs(urlsplit(url).query) for url in streams] == [
        {"follow": ["true"], "from_sequence": ["1"], "max_entries_per_message": ["200"]},
        {"follow": ["true"], "from_sequence": [str(head + 1)], "max_entries_per_message": ["200"]},
    ], streams
    expect(page.locator("#continuity-state")).to_contain_text("failed")
