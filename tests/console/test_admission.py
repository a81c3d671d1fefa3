"""The v1 and v2 admissions through the console: the same review pattern as the recoveries."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from forge.continuity.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from tests.console.conftest import assert_every_control_labelled, open_run, screenshot
from tests.gateway.conftest import RunningGateway, enable_policy, seed

V1 = [
    "No new grant is created: the continuation uses the original grants.",
    "The original consumption stays charged.",
    "Only a finite ownership lease for the same attempt is renewed.",
]
V2 = [*V1, "Source observations whose results were not retained stay unavailable to the next turn."]


def allow_unavailable_observations(gateway: RunningGateway) -> None:
    policy = policy_pb2_grpc.PolicyServiceStub(gateway.ledger.channel("admin-token"))
    current = policy.GetPolicy(policy_pb2.GetPolicyRequest()).policy
    policy.PutPolicy(
        policy_pb2.PutPolicyRequest(
            expected_revision=current.revision,
            settings=common_pb2.PolicySettings(
                enabled=True, window_seconds=3600, allow_unavailable_source_observations=True
            ),
        )
    )


def saved_admission(page: Page) -> dict[str, Any]:
    raw = page.evaluate(
        "Object.keys(sessionStorage).filter(k => k.includes(':admission'))"
        ".map(k => sessionStorage.getItem(k))"
    )
    assert len(raw) == 1, raw
    action: dict[str, Any] = json.loads(raw[0])
    return action


@pytest.mark.parametrize(
    ("fixture", "version", "acknowledgements"), [("v1_basic", 1, V1), ("v2_list_sibling", 2, V2)]
)
def test_an_operator_admits_the_reviewed_candidate(
    page: Page,
    gateway: RunningGateway,
    fixture: str,
    version: int,
    acknowledgements: list[str],
) -> None:
    run_id = f"run-console-v{version}"
    seed(gateway, run_id, fixture)
    allow_unavailable_observations(gateway)
    sent: list[tuple[str, str]] = []
    page.on("request", lambda r: sent.append((r.method, r.url)))
    open_run(page, gateway, run_id, "operator-token")
    page.get_by_role("button", name="Check current admission").click()
    expect(page.get_by_text("No admission ticket exists for this run.")).to_be_visible()
    if version == 2:
        page.get_by_label("Version 2", exact=False).check()
    rows = gateway.rows()
    review = page.get_by_role("button", name=f"Review admission (version {version})")
    review.click()
    assert gateway.rows() == rows, "the permission read and the review write nothing"
    action = saved_admission(page)
    assert action["state"] == "reviewing" and action["version"] == version

    submit = page.get_by_role("button", name="Queue continuation")
    for label in acknowledgements:
        expect(submit).to_be_disabled()
        page.get_by_label(label).check()
    expect(submit).to_be_enabled()
    assert_every_control_labelled(page)
    # Offered after reading the caller's permissions, never by sending a write to probe.
    assert any(url.endswith("/api/v1/caller/permissions") for _, url in sent)
    assert [request for request in sent if request[0] != "GET"] == []
    submit.click()
    receipt = page.locator('[data-receipt="queued"]')
    expect(receipt).to_contain_text("Continuation queued")
    expect(receipt).to_contain_text("admission only")
    # The receipt explains the granted lease with the bounds the ledger stored with the ticket.
    bounds = receipt.locator("[data-lease-bounds]")
    expect(bounds).to_have_attribute("data-lease-bounds", "LEASE_BOUND_PROVIDER_TIMEOUT")
    expect(bounds).to_contain_text("bounded by the run's provider timeout")
    screenshot(page, gateway, f"admission-v{version}-desktop")

    with gateway.client("reader-token") as client:
        reply = client.get(
            f"/api/v1/runs/{run_id}/invalid-read-continuity/requests/{action['requestId']}"
        )
    assert reply.status_code == 200, reply.text
    assert reply.json()["ticket"]["version"] == version
    # Checking again reads the ticket; the generic admission control is withheld.
    page.get_by_role("button", name="Check current admission").click()
    ticket = page.locator(f'[data-ticket="{action["requestId"]}"]')
    expect(ticket).to_be_visible()
    expect(ticket.locator("[data-lease-bounds]")).to_contain_text("requested ")
    expect(page.get_by_role("button", name=f"Review admission (version {version})")).to_have_count(
        0
    )


@pytest.mark.parametrize(
    ("token", "explanation", "candidate_read"),
    [
        ("admin-token", "Admission needs execution operator authority", True),
        ("reader-token", "no candidate and no action", False),
    ],
)
def test_a_caller_without_operator_authority_is_offered_nothing(
    page: Page, gateway: RunningGateway, token: str, explanation: str, candidate_read: bool
) -> None:
    run_id = "run-console-no-operator"
    seed(gateway, run_id)
    enable_policy(gateway)
    rows = gateway.rows()
    sent: list[tuple[str, str]] = []
    page.on("request", lambda r: sent.append((r.method, r.url)))
    open_run(page, gateway, run_id, token)
    page.get_by_role("button", name="Check current admission").click()
    expect(page.get_by_text(explanation)).to_be_visible()
    expect(page.get_by_role("button", name="Review admission (version 1)")).to_have_count(0)
    assert gateway.rows() == rows
    # The decision comes from the permissions read: nothing is sent that the server refuses.
    assert any(url.endswith("/api/v1/caller/permissions") for _, url in sent)
    assert [request for request in sent if request[0] != "GET"] == []
    read = any("/invalid-read-continuity/candidate" in url for _, url in sent)
    assert read == candidate_read  # a reader is not even sent to the candidate it may not read


def test_the_permissions_read_decides_what_is_offered(page: Page, gateway: RunningGateway) -> None:
    """A permissions answer that withholds the submission withholds the button, even for an
    operator whose candidate is eligible: the page follows the server's decision, not a guess."""
    run_id = "run-console-withheld"
    seed(gateway, run_id)
    enable_policy(gateway)

    def withhold(route: Route) -> None:
        reply = route.fetch()
        document = reply.json()
        for permission in document["permissions"]:
            if permission["method"].endswith("/RequestInvalidReadContinuity"):
                permission["permitted"] = False
        route.fulfill(response=reply, json=document)

    page.route("**/api/v1/caller/permissions", withhold)
    open_run(page, gateway, run_id, "operator-token")
    page.get_by_role("button", name="Check current admission").click()
    expect(page.get_by_text("Admission needs execution operator authority")).to_be_visible()
    expect(page.get_by_text("eligible", exact=True).first).to_be_visible()
    expect(page.get_by_role("button", name="Review admission (version 1)")).to_have_count(0)

    page.unroute("**/api/v1/caller/permissions")
    page.route("**/api/v1/caller/permissions", lambda route: route.abort())
    page.get_by_role("button", name="Check current admission").click()
    expect(page.get_by_text("The caller's permissions could not be read")).to_be_visible()
    expect(page.get_by_role("button", name="Review admission (version 1)")).to_have_count(0)


def test_a_late_answer_for_the_version_left_does_not_replace_the_version_chosen(
    page: Page, gateway: RunningGateway
) -> None:
    """The operator picks version 2 while version 1's candidate is still being read: when version
    1's answer arrives after version 2's, the card keeps version 2's candidate and action."""
    run_id = "run-console-late"
    seed(gateway, run_id, "v2_list_sibling")
    allow_unavailable_observations(gateway)
    held: list[Route] = []

    def hold_version_1(route: Route) -> None:
        if route.request.url.endswith("version=1") and not held:
            held.append(route)  # answered below, once version 2's candidate is shown
        else:
            route.continue_()

    page.route(re.compile(r".*/invalid-read-continuity/candidate\?version=\d$"), hold_version_1)
    open_run(page, gateway, run_id, "operator-token")
    with page.expect_request(lambda request: request.url.endswith("version=1")):
        page.get_by_role("button", name="Check current admission").click()
    # Version 1's read is on its way before version 2 is picked (the route handler runs while
    # Playwright is being called: wait for it to hold the request).
    for _ in range(400):
        if held:
            break
        page.wait_for_timeout(50)
    assert len(held) == 1
    page.get_by_label("Version 2", exact=False).check()
    expect(page.get_by_role("button", name="Review admission (version 2)")).to_be_visible()
    with page.expect_response(lambda response: response.url.endswith("version=1")):
        held[0].continue_()
    # A macrotask later every callback of the late answer has run.
    page.evaluate("() => new Promise(resolve => setTimeout(resolve, 200))")
    expect(page.get_by_role("button", name="Review admission (version 2)")).to_be_visible()
    expect(page.get_by_role("button", name="Review admission (version 1)")).to_have_count(0)
