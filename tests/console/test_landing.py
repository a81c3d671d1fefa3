"""The console's landing page (ADR 0022): the runs with their continuity state, a state filter,
search by id prefix, the next page, each row linking to its run, and no sideways scrolling on a
390 px phone."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.console.conftest import (
    PHONE,
    admitted,
    assert_every_control_labelled,
    screenshot,
)
from tests.gateway.conftest import RunningGateway, seed
from tests.ledger.conftest import run_request


def enter_token(page: Page, gateway: RunningGateway, token: str = "reader-token") -> None:
    page.goto(f"{gateway.url}/console/")
    expect(page.get_by_text("Enter your bearer token above to list the runs.")).to_be_visible()
    page.get_by_label("Bearer token").fill(token)
    page.get_by_role("button", name="Use token").click()


def rows(page: Page) -> list[str]:
    return page.locator("table.runs tbody tr td:first-child").all_inner_texts()


def test_the_landing_page_lists_filters_and_opens_runs(page: Page, gateway: RunningGateway) -> None:
    seed(gateway, "run-held-a")
    seed(gateway, "run-held-b")
    admitted(gateway, "run-admitted")
    enter_token(page, gateway)
    expect(page.locator("table.runs tbody tr")).to_have_count(3)
    assert rows(page) == ["run-admitted", "run-held-b", "run-held-a"]
    first = page.locator("table.runs tbody tr").first
    expect(first).to_contain_text("admitted")
    page.get_by_label("Continuity state").select_option("held")
    page.get_by_role("button", name="Show runs").click()
    expect(page.locator("table.runs tbody tr")).to_have_count(2)
    assert rows(page) == ["run-held-b", "run-held-a"]
    page.get_by_label("Search: ID starts with").fill("run-held-a")
    page.get_by_role("button", name="Show runs").click()
    expect(page.locator("table.runs tbody tr")).to_have_count(1)
    page.get_by_label("Search: ID starts with").fill("nothing-")
    page.get_by_role("button", name="Show runs").click()
    expect(page.get_by_text("No runs match.")).to_be_visible()
    page.get_by_label("Search: ID starts with").fill("")
    page.get_by_label("Continuity state").select_option("")
    page.get_by_role("button", name="Show runs").click()
    expect(page.locator("table.runs tbody tr")).to_have_count(3)
    assert_every_control_labelled(page)
    screenshot(page, gateway, "landing-desktop")
    page.get_by_role("link", name="run-held-a").click()
    expect(page.get_by_role("heading", name="Run run-held-a")).to_be_visible()


def test_the_next_page_continues_where_the_first_ended(page: Page, gateway: RunningGateway) -> None:
    writer = gateway.ledger_stub("writer-token")
    for index in range(27):
        writer.CreateRun(run_request(f"run-{index:02d}"))
    enter_token(page, gateway)
    expect(page.locator("table.runs tbody tr")).to_have_count(25)
    first = rows(page)
    page.get_by_role("button", name="Next page").click()
    expect(page.locator("table.runs tbody tr")).to_have_count(2)
    second = rows(page)
    assert sorted(first + second) == [f"run-{index:02d}" for index in range(27)]
    expect(page.get_by_role("button", name="Next page")).to_be_hidden()
    page.get_by_role("button", name="First page").click()
    expect(page.locator("table.runs tbody tr")).to_have_count(25)


def test_a_bad_token_is_reported_not_listed(page: Page, gateway: RunningGateway) -> None:
    enter_token(page, gateway, "unknown-token")
    expect(page.locator("#status")).to_contain_text("Runs could not be listed")
    expect(page.locator("table.runs")).to_have_count(0)


def test_nothing_scrolls_sideways_on_a_390_px_phone(page: Page, gateway: RunningGateway) -> None:
    seed(gateway, "run-with-a-rather-long-identifier-that-must-wrap-on-a-phone-0123456789")
    admitted(gateway, "run-admitted-phone")
    page.set_viewport_size(PHONE)
    enter_token(page, gateway)
    expect(page.locator("table.runs tbody tr")).to_have_count(2)
    screenshot(page, gateway, "landing-phone")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
