"""The v1 and v2 admissions through the console: the same review pattern as the recoveries."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import Page, expect

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
    open_run(page, gateway, run_id, "operator-token")
    page.get_by_role("button", name="Check current admission").click()
    expect(page.get_by_text("No admission ticket exists for this run.")).to_be_visible()
    if version == 2:
        page.get_by_label("Version 2", exact=False).check()
    rows = gateway.rows()
    review = page.get_by_role("button", name=f"Review admission (version {version})")
    review.click()
    assert gateway.rows() == rows, "the authority check and the review write nothing"
    action = saved_admission(page)
    assert action["state"] == "reviewing" and action["version"] == version

    submit = page.get_by_role("button", name="Queue continuation")
    for label in acknowledgements:
        expect(submit).to_be_disabled()
        page.get_by_label(label).check()
    expect(submit).to_be_enabled()
    assert_every_control_labelled(page)
    submit.click()
    receipt = page.locator('[data-receipt="queued"]')
    expect(receipt).to_contain_text("Continuation queued")
    expect(receipt).to_contain_text("admission only")
    screenshot(page, f"admission-v{version}-desktop")

    with gateway.client("reader-token") as client:
        reply = client.get(
            f"/api/v1/runs/{run_id}/invalid-read-continuity/requests/{action['requestId']}"
        )
    assert reply.status_code == 200, reply.text
    assert reply.json()["ticket"]["version"] == version
    # Checking again reads the ticket; the generic admission control is withheld.
    page.get_by_role("button", name="Check current admission").click()
    expect(page.locator(f'[data-ticket="{action["requestId"]}"]')).to_be_visible()
    expect(page.get_by_role("button", name=f"Review admission (version {version})")).to_have_count(
        0
    )


@pytest.mark.parametrize(
    ("token", "explanation"),
    [
        ("admin-token", "Admission needs execution operator authority"),
        ("reader-token", "no candidate and no action"),
    ],
)
def test_a_caller_without_operator_authority_is_offered_nothing(
    page: Page, gateway: RunningGateway, token: str, explanation: str
) -> None:
    run_id = "run-console-no-operator"
    seed(gateway, run_id)
    enable_policy(gateway)
    rows = gateway.rows()
    open_run(page, gateway, run_id, token)
    page.get_by_role("button", name="Check current admission").click()
    expect(page.get_by_text(explanation)).to_be_visible()
    expect(page.get_by_role("button", name="Review admission (version 1)")).to_have_count(0)
    assert gateway.rows() == rows
