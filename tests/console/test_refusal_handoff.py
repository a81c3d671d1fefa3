"""A refusal of the admissibility check shows the handoff it carries, in a real browser against
real services: what is bound, what is known and what the operator may do next."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import Engine

from services.ledger.service import Ledger
from tests.console.conftest import (
    ADMIN_OPERATOR,
    admitted,
    failed_unclaimed,
    open_run,
    screenshot,
)
from tests.console.test_review_flow import ACKNOWLEDGEMENTS, saved_actions
from tests.gateway.conftest import RunningGateway
from tests.recovery.conftest import Authority

ADMIN_OPERATOR_IDENTITY = "ada-admin-operator"


@pytest.fixture
def authority() -> Authority:
    return Authority()


@pytest.fixture
def ledger(engine: Engine, authority: Authority) -> Ledger:
    """The ledger asks ``authority`` (which the test revokes) inside every recovery transaction."""
    return Ledger(engine, authority=authority)


def test_a_refused_recovery_shows_its_handoff(
    page: Page, gateway: RunningGateway, authority: Authority
) -> None:
    run_id = "run-console-handoff"
    failed = failed_unclaimed(gateway, run_id)
    open_run(page, gateway, run_id, ADMIN_OPERATOR)
    page.get_by_role("button", name="Check current admission").click()
    page.get_by_role("button", name="Review failed admission").click()
    for label in ACKNOWLEDGEMENTS:
        page.get_by_label(label).check()
    # The operator's authority is withdrawn after the review: the ledger's check refuses.
    authority.revoke(ADMIN_OPERATOR_IDENTITY, "factory_administrator")
    rows = gateway.rows()
    page.get_by_role("button", name="Requeue existing task").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Refused; nothing was recorded")
    expect(alert).to_contain_text("RECOVERY_UNRESOLVED")
    handoff = alert.locator("[data-refusal-handoff]")
    expect(handoff).to_contain_text("Permitted next actions")
    expect(handoff).to_contain_text("obtain_authority")
    expect(handoff).to_contain_text("blocked by AUTHORITY_MISSING")
    expect(handoff).to_contain_text(f"{failed['execution_request_id']}")
    assert gateway.rows() == rows
    assert saved_actions(page)[0]["state"] == "refused"
    screenshot(page, gateway, "refusal-handoff")


def test_a_refused_cancel_shows_its_handoff(page: Page, gateway: RunningGateway) -> None:
    """An operator who did not admit the request is refused its cancel (ADR 0046): the refusal
    shows the request it was bound to and what is permitted next, and nothing is recorded."""
    run_id = "run-console-cancel-handoff"
    queued = admitted(gateway, run_id)
    open_run(page, gateway, run_id, "operator-token")
    rows = gateway.rows()
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel request").click()
    alert = page.locator("#request-refusal [role=alert]")
    expect(alert).to_contain_text("refused; nothing was recorded")
    expect(alert).to_contain_text("CANCEL_NOT_PERMITTED")
    handoff = alert.locator("[data-refusal-handoff]")
    expect(handoff).to_contain_text("Permitted next actions")
    expect(handoff).to_contain_text("obtain_authority")
    expect(handoff).to_contain_text("blocked by CANCEL_NOT_PERMITTED")
    expect(handoff).to_contain_text(queued["execution_request_id"])
    assert gateway.rows() == rows
    screenshot(page, gateway, "refused-cancel-handoff")
