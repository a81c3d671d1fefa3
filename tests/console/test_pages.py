"""The console's pages: served by the gateway, self-contained, and reachable from the index."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from services.gateway.console import STATIC
from tests.console.conftest import PHONE, assert_every_control_labelled, screenshot
from tests.gateway.conftest import RunningGateway, enable_policy, seed


def test_the_pages_fetch_nothing_from_outside(gateway: RunningGateway) -> None:
    with gateway.client() as client:
        for path in ("/console/", "/console/runs/run-x", "/console/static/console.js"):
            reply = client.get(path)
            assert reply.status_code == 200, path
            policy = reply.headers["content-security-policy"]
            assert "default-src 'none'" in policy and "script-src 'self'" in policy
        assert client.get("/console", follow_redirects=False).status_code == 308
        assert client.get("/console/static/other.js").status_code == 404
    for asset in STATIC.iterdir():
        text = asset.read_text()
        assert not re.search(r"(src|href)=[\"']?(https?:)?//", text), asset.name
        assert not re.search(r"fetch\([\"'`]https?:", text), asset.name


def test_the_index_keeps_the_token_and_opens_the_run(page: Page, gateway: RunningGateway) -> None:
    seed(gateway, "run-console-index")
    page.set_viewport_size(PHONE)
    page.goto(f"{gateway.url}/console/")
    page.get_by_label("Bearer token").fill("reader-token")
    page.get_by_label("Run ID").fill("run-console-index")
    screenshot(page, gateway, "index-phone")
    page.get_by_role("button", name="Open run").click()
    expect(page.get_by_role("heading", name="Run run-console-index")).to_be_visible()
    expect(page.locator("#command-ledger")).to_have_text("11 of 22 commands used")
    assert page.evaluate("sessionStorage.getItem('forge.console.token')") == "reader-token"
    assert_every_control_labelled(page)
    page.get_by_role("button", name="Forget token").click()
    expect(page.get_by_label("Bearer token")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('forge.console.token')") is None


def test_the_run_page_shows_the_lease_window_the_ledger_would_grant(
    page: Page, gateway: RunningGateway
) -> None:
    # Policy window 3600 s, frozen provider timeout 600 s: the ledger answers 600 s with the run,
    # and the console shows that answer (it keeps no copy of the lease-bound rule).
    enable_policy(gateway)
    seed(gateway, "run-console-window", provider_timeout_seconds=600)
    page.goto(f"{gateway.url}/console/")
    page.get_by_label("Bearer token").fill("reader-token")
    page.get_by_label("Run ID").fill("run-console-window")
    page.get_by_role("button", name="Open run").click()
    expect(page.locator("#run-facts")).to_contain_text(
        re.compile(r"Lease window the server would grant\s*600 s")
    )
