"""The operator console in a real headless Chromium, against the four real services and the
gateway on loopback (the gateway fixture of tests/gateway).

Chromium comes from the distribution's packages (`make test` and `.ci/run` install it); Playwright
drives it through its executable path and never downloads a browser. Without Chromium the tests
skip on a developer machine and fail under CI=true. Screenshots go to test-artifacts/console/,
named with the database the run used (sqlite or postgresql).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Playwright, sync_playwright
from sqlalchemy import Engine

from services.gateway.config import GatewaySettings
from services.ledger.service import Ledger
from tests.admission.conftest import Stack, stack
from tests.gateway.conftest import (
    RunningGateway,
    enable_policy,
    running_gateway,
    seed,
    v1_submission,
)
from tests.recovery.conftest import Authority

__all__ = ["stack"]  # the four services over `ledger` (SQLite and PostgreSQL), as a fixture here

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "console"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
# Where a page may not scroll sideways: a phone, a small desktop and a usual one.
WIDTHS = (PHONE["width"], 1024, DESKTOP["width"])
# The original operator of every ticket below also holds factory administrator authority.
ADMIN_OPERATOR = "admin-operator-token"


@pytest.fixture
def ledger(engine: Engine) -> Ledger:
    """The ledger asks the test principals' current roles inside every recovery transaction."""
    return Ledger(engine, authority=Authority())


@pytest.fixture
def gateway(stack: Stack, engine: Engine) -> Iterator[RunningGateway]:
    """The gateway, serving the console, in front of the four real services."""
    settings = GatewaySettings(
        targets={
            "ledger": stack.ledger.target,
            "candidate": stack.candidate.target,
            "admission": stack.admission.target,
        }
    )
    with running_gateway(settings) as url:
        yield RunningGateway(url, engine, stack.ledger)


def chromium_path() -> str:
    found = os.environ.get("FORGE_CHROMIUM") or shutil.which("chromium") or ""
    if found:
        return found
    message = "chromium is not installed (apt-get install chromium; make test installs it)"
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(message)
    pytest.skip(message)


# Package scope, not session: Playwright's sync API keeps an event loop running in this thread
# while it is started, and every later test that calls asyncio.run() would fail.
@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    # Playwright gives every launch a fresh temporary profile (its own --user-data-dir).
    launched = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS)
    try:
        yield launched
    finally:
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context (its own session storage) at desktop size."""
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(20_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield tab
    finally:
        context.close()
    assert not errors, errors  # a script error in the page fails the test


def assert_fits_every_width(page: Page, name: str) -> None:
    """The page, in the state it is in now, scrolls sideways at none of WIDTHS (a phone, a small
    and a usual desktop); the viewport it had is restored afterwards."""
    viewport = page.viewport_size or DESKTOP
    too_wide: dict[int, int] = {}
    try:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": viewport["height"]})
            scroll = page.evaluate("document.documentElement.scrollWidth")
            if scroll > width:
                too_wide[width] = scroll
    finally:
        page.set_viewport_size(viewport)
    assert not too_wide, f"{name} at {page.url}: " + ", ".join(
        f"{scroll} px wide at {width} px" for width, scroll in too_wide.items()
    )


def screenshot(page: Page, gateway: RunningGateway, name: str) -> Path:
    """Saved as ``<name>-<database>.png``: the SQLite and PostgreSQL runs keep their own. Every
    page state photographed is first checked at every one of WIDTHS."""
    assert_fits_every_width(page, name)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}-{gateway.engine.dialect.name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def assert_every_control_labelled(page: Page) -> None:
    """Every input and button has an accessible name (a label, aria-label or its text)."""
    unnamed = page.evaluate(
        "[...document.querySelectorAll('input, button, select, textarea')]"
        ".filter(c => !c.labels?.length && !c.getAttribute('aria-label')"
        " && !c.textContent.trim()).map(c => c.outerHTML)"
    )
    assert unnamed == []


def open_run(page: Page, gateway: RunningGateway, run_id: str, token: str) -> None:
    """Open the run's page and enter the token once, as an operator would."""
    page.goto(f"{gateway.url}/console/runs/{run_id}")
    page.get_by_label("Bearer token").fill(token)
    page.get_by_role("button", name="Use token").click()
    page.get_by_text("commands used").first.wait_for()


def admitted(gateway: RunningGateway, run_id: str) -> dict[str, Any]:
    """A held run admitted (v1) by the administrator-operator; its execution request."""
    seed(gateway, run_id)
    enable_policy(gateway)
    with gateway.client(ADMIN_OPERATOR) as client:
        candidate = client.get(f"/api/v1/runs/{run_id}/invalid-read-continuity/candidate")
        reply = client.post(
            f"/api/v1/runs/{run_id}/invalid-read-continuity/requests/{run_id}-request-1",
            json=v1_submission(candidate.json()["candidate"]),
        )
    assert reply.status_code == 200, reply.text
    request: dict[str, Any] = reply.json()["ticket"]["execution_request"]
    return request


def fail_unclaimed(gateway: RunningGateway, execution_request_id: str) -> dict[str, Any]:
    """The dispatcher (an administrator, ADR 0041) fails a queued request before any claim; the
    failed request."""
    with gateway.client("admin-token") as client:
        reply = client.post(
            f"/api/v1/execution-requests/{execution_request_id}:fail-unclaimed",
            json={"reason": "dispatch_refused"},
        )
    assert reply.status_code == 200, reply.text
    failed: dict[str, Any] = reply.json()["execution_request"]
    return failed


def failed_unclaimed(gateway: RunningGateway, run_id: str) -> dict[str, Any]:
    """An admitted continuation that the dispatcher failed before any worker claimed it."""
    failed = fail_unclaimed(gateway, admitted(gateway, run_id)["execution_request_id"])
    assert failed["state"] == "EXECUTION_REQUEST_STATE_FAILED"
    return failed
