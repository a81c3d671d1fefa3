"""Host controls of what stops a continuation, each before the worker's next effect: lease
expiry, revoked policy, cancellation, the admitting operator's lost authority, an incompatible
source, configuration or profile at claim, and another worker's claim; and of what does not: a
policy edit that keeps the policy enabled. The worker is its own process; the request is left as
the ledger has it (ADR 0014)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from forge.continuity.v1 import common_pb2, execution_pb2
from services.demo.scripted_provider import ScriptedProvider, reference_script
from services.worker import config as settings
from services.worker.run import EXIT_COMPLETED, EXIT_NOTHING_TO_RUN, EXIT_STOPPED
from shared.continuity.qualification import EXTRA_PROFILES_VARIABLE
from tests.host_controls.conftest import Gate, MovableClock, Workers, before_answering, variants
from tests.recovery.conftest import Authority
from tests.worker.conftest import COMMANDS, Continuation

CLAIMED = common_pb2.EXECUTION_REQUEST_STATE_CLAIMED
QUEUED = common_pb2.EXECUTION_REQUEST_STATE_QUEUED
CANCELLED = common_pb2.EXECUTION_REQUEST_STATE_CANCELLED


def stops_before_the_next_effect(
    admitted: Continuation,
    workers: Workers,
    at: int,
    stop: Callable[[], None],
    reason: str,
    left: common_pb2.ExecutionRequestState.ValueType = CLAIMED,
) -> None:
    """``stop`` happens while the provider prepares answer ``at``; the worker's record of that
    answer is refused, so the effect it asks for never runs and nothing more is sent."""
    with ScriptedProvider(before_answering(reference_script(COMMANDS), {at: stop})) as model:
        finished = workers.run(model)
    assert finished.returncode == EXIT_STOPPED, finished.message
    assert f"AppendJournalEntry: {reason}" in finished.message
    assert len(model.received) == at + 1  # nothing sent after the refusal
    kinds = [kind for kind, _ in admitted.after_claim()]
    assert kinds.count("response_consumed") == at  # the answer after the stop was refused
    assert kinds.count("tool_intent") == at  # ... and so was the effect it asked for
    if at >= 3:  # the answer asked for the first command: never charged, never run
        assert not (admitted.source / "ran-1").exists()
        assert admitted.usage() == (11, 22)
    assert admitted.request().state == left  # left as the ledger has it


@pytest.mark.parametrize("at", variants(1, 3))
def test_an_expired_lease_stops_the_worker_before_its_next_effect(
    admitted: Continuation, workers: Workers, clock: MovableClock, at: int
) -> None:
    lease = admitted.ticket.execution_request.lease.seconds
    stops_before_the_next_effect(
        admitted, workers, at, lambda: clock.advance(lease + 1), "LEASE_EXPIRED"
    )


@pytest.mark.parametrize("at", variants(1, 3))
def test_a_disabled_policy_stops_the_worker_before_its_next_effect(
    admitted: Continuation, workers: Workers, at: int
) -> None:
    stops_before_the_next_effect(
        admitted, workers, at, lambda: admitted.stack.set_policy(enabled=False), "POLICY_REVOKED"
    )


@pytest.mark.parametrize("at", variants(1, 3))
def test_a_cancellation_stops_the_worker_before_its_next_effect(
    admitted: Continuation, workers: Workers, at: int
) -> None:
    exr = admitted.ticket.execution_request.execution_request_id

    def cancel() -> None:
        admitted.execution("operator-token").CancelExecutionRequest(
            execution_pb2.CancelExecutionRequestRequest(
                execution_request_id=exr, reason="the operator withdrew the continuation"
            )
        )

    stops_before_the_next_effect(
        admitted, workers, at, cancel, "EXECUTION_REQUEST_CANCELLED", left=CANCELLED
    )


@pytest.mark.parametrize("at", variants(1, 3))
def test_the_admitting_operators_lost_authority_stops_the_worker_before_its_next_effect(
    admitted: Continuation, workers: Workers, authority: Authority, at: int
) -> None:
    operator = admitted.ticket.operator_identity
    stops_before_the_next_effect(
        admitted,
        workers,
        at,
        lambda: authority.revoke(operator, "execution_operator"),
        "OPERATOR_AUTHORITY_REVOKED",
    )


def test_a_policy_edit_that_keeps_the_policy_enabled_does_not_stop_the_worker(
    admitted: Continuation, workers: Workers
) -> None:
    """Raising the queue caps mid-run writes a new policy revision; the running continuation
    goes on to completion under its original allowances (spec: changing queue capacity does not
    change any lifetime execution allowance)."""
    edit = {2: lambda: admitted.stack.set_policy(pending_ticket_limit=900)}
    with ScriptedProvider(before_answering(reference_script(COMMANDS), edit)) as model:
        finished = workers.run(model)
    assert finished.returncode == EXIT_COMPLETED, finished.message
    assert admitted.usage() == (13, 22)
    assert admitted.request().state == common_pb2.EXECUTION_REQUEST_STATE_COMPLETED


@pytest.mark.parametrize(
    ("variable", "value"),
    variants(
        (settings.SOURCE_PROFILE, "forge-worker/firefly-agentic-27.1.0/pydantic-ai-2.60.0"),
        (settings.CONFIGURATION_DIGEST, "sha256:" + "e" * 64),
        (settings.SOURCE_REVISION, "f" * 40),
    ),
)
def test_a_worker_of_another_source_configuration_or_profile_cannot_claim(
    admitted: Continuation, workers: Workers, provider: ScriptedProvider, variable: str, value: str
) -> None:
    journal = admitted.journal()
    # The other profile is registered with this worker's code, so the worker itself claims (a
    # profile its code does not qualify for claims nothing: test_tool_contract.py) and the
    # ledger's claim check refuses the profile that is not the run's.
    registered = {EXTRA_PROFILES_VARIABLE: value} if variable == settings.SOURCE_PROFILE else {}
    finished = workers.run(provider, env={variable: value, **registered})
    assert finished.returncode == EXIT_NOTHING_TO_RUN
    assert "ClaimExecutionRequest: CLAIM_CHECK_FAILED" in finished.message
    assert provider.received == []
    assert admitted.journal() == journal
    assert admitted.request().state == QUEUED  # still there for a compatible worker


def test_a_second_worker_cannot_claim_a_running_continuation(
    admitted: Continuation, workers: Workers, gates: list[Gate]
) -> None:
    gate = Gate(reference_script(COMMANDS), at=2)
    gates.append(gate)
    with ScriptedProvider(gate) as model:
        first = workers.start(model)
        gate.wait()  # the first worker holds the claim and waits on its provider
        with ScriptedProvider(reference_script(COMMANDS)) as other:
            exr = admitted.ticket.execution_request.execution_request_id
            second = workers.run(other, token="worker2-token", args=["--execution-request-id", exr])
        assert second.returncode == EXIT_NOTHING_TO_RUN
        assert "ClaimExecutionRequest: EXECUTION_REQUEST_NOT_QUEUED" in second.message
        assert other.received == []
        gate.released.set()
        assert first.finish().returncode == EXIT_COMPLETED
    claims = [k for k, _ in admitted.after_claim() if k == "worker_claimed"]
    assert claims == ["worker_claimed"]
    assert admitted.usage() == (13, 22)
