"""The pinned SDK's work on a caller's bytes is bounded (issue 45 §2, ADR 0048): a response that
costs far more than it is worth (40,000 tool calls: quadratic in the analysis, 19.9 s measured)
is stopped at the service's time limit or the caller's deadline, in a worker process that is then
replaced, while other callers are answered."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from forge.continuity.v1 import reconstruction_pb2, reconstruction_pb2_grpc
from services.reconstruction.isolation import IsolatedRunner
from services.reconstruction.servicer import ReconstructionServicer, bindings
from shared.contract.channels import open_channel
from shared.runtime.deadline import reset_inbound_deadline, set_inbound_deadline
from shared.runtime.errors import DeadlineExceeded, FailedPrecondition, ResourceExhausted
from shared.runtime.limits import ReconstructionBounds, reconstruction_bounds
from tests.errors import expect_error
from tests.reconstruction.conftest import Case
from tests.support import serve

HOSTILE_CALLS = 40_000
# Far above a legitimate analysis on a loaded machine (0.1 s idle, the first in a worker more),
# far below the hostile one (19.9 s idle; 20,000 calls, 5.2 s since the analysis got faster, were
# sometimes answered within the limit on a quiet machine).
LIMIT_SECONDS = 5.0
# Liveness bounds, far above what the bounded calls take.
WAIT_SECONDS = 120.0


def hostile_response(case: Case) -> bytes:
    """The case's consumed response with ``HOSTILE_CALLS`` more tool calls (about 4.6 MiB)."""
    response = json.loads(case.raw_response)
    calls = response["choices"][0]["message"]["tool_calls"]
    for index in range(HOSTILE_CALLS):
        arguments = json.dumps({"path": "x" * 10})
        calls.append(
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {"name": "list_files", "arguments": arguments},
            }
        )
    return json.dumps(response).encode()


def _all_idle(runner: IsolatedRunner) -> None:
    ends = time.monotonic() + WAIT_SECONDS
    while runner.idle < runner.workers:
        assert time.monotonic() < ends, "the workers did not start"
        time.sleep(0.05)


def _reraise(error: BaseException) -> None:
    raise error


@pytest.fixture(scope="module")
def runner() -> Iterator[IsolatedRunner]:
    started = IsolatedRunner(2, LIMIT_SECONDS)
    yield started
    started.close()


def _analyze(checkpoint: bytes, raw: bytes) -> reconstruction_pb2.AnalyzeConsumedResponseRequest:
    return reconstruction_pb2.AnalyzeConsumedResponseRequest(
        checkpoint=checkpoint, raw_response=raw
    )


def test_a_hostile_response_is_stopped_at_the_time_limit_while_others_are_answered(
    basic: Case, runner: IsolatedRunner
) -> None:
    servicer = ReconstructionServicer(runner=runner)
    with serve("reconstruction", bindings(servicer)) as served:
        stub = reconstruction_pb2_grpc.ReconstructionServiceStub(
            open_channel(served.target, "candidate-service-token")
        )
        legitimate = _analyze(basic.checkpoint, basic.raw_response)
        assert stub.AnalyzeConsumedResponse(legitimate, timeout=WAIT_SECONDS).tool_calls
        outcome: list[BaseException] = []

        def hostile() -> None:
            try:
                stub.AnalyzeConsumedResponse(
                    _analyze(basic.checkpoint, hostile_response(basic)), timeout=WAIT_SECONDS
                )
            except grpc.RpcError as error:
                outcome.append(error)

        attacker = threading.Thread(target=hostile)
        attacker.start()
        ends = time.monotonic() + WAIT_SECONDS
        while runner.running == 0 and attacker.is_alive():
            assert time.monotonic() < ends, "the hostile call never reached a worker"
            time.sleep(0.01)
        # While the hostile response occupies one worker, another caller is answered (from the
        # other worker: a different response, so not from the cache).
        other = _analyze(basic.checkpoint, basic.raw_response.replace(b"call_ev_1", b"call_ev_2"))
        assert stub.AnalyzeConsumedResponse(other, timeout=WAIT_SECONDS).tool_calls
        attacker.join(WAIT_SECONDS)
        assert len(outcome) == 1, "the hostile response was analysed to the end"
        error = expect_error(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "RECONSTRUCTION_TIME_LIMIT",
            lambda: _reraise(outcome[0]),
        )
        assert error.metadata == {"max_seconds": "5", "bound": "time"}
        # The stopped worker is replaced: the service answers as before.
        third = _analyze(basic.checkpoint, basic.raw_response.replace(b"call_ev_1", b"call_ev_3"))
        assert stub.AnalyzeConsumedResponse(third, timeout=WAIT_SECONDS).tool_calls


def test_the_callers_deadline_stops_the_work_it_no_longer_waits_for(
    basic: Case, runner: IsolatedRunner
) -> None:
    servicer = ReconstructionServicer(runner=runner)
    _all_idle(runner)  # the deadline below is for the work, not for a worker's start
    stopped_before = runner.stopped
    token = set_inbound_deadline(0.5)  # the caller waits 0.5 s, the service's limit is 5 s
    try:
        with pytest.raises(DeadlineExceeded) as stopped:
            servicer.AnalyzeConsumedResponse(
                _analyze(basic.checkpoint, hostile_response(basic)), None
            )
    finally:
        reset_inbound_deadline(token)
    assert stopped.value.reason == "CALL_DEADLINE_PASSED"
    assert runner.stopped == stopped_before + 1
    assert runner.stopped_by["CALL_DEADLINE_PASSED"] == 1


def spin_for_ever() -> None:
    """A computation that never ends (run in a worker process)."""
    while True:
        pass


def test_a_computation_that_spins_is_ended_by_its_cpu_limit_whoever_waits() -> None:
    # The wall limit (a liveness bound here) is far away: the kernel ends the worker at 1 s of CPU.
    runner = IsolatedRunner(1, WAIT_SECONDS, cpu_seconds=1.0)
    try:
        with pytest.raises(ResourceExhausted) as stopped:
            runner.run(spin_for_ever)
        assert stopped.value.reason == "RECONSTRUCTION_TIME_LIMIT"
        assert stopped.value.metadata == {"max_seconds": "1", "bound": "CPU"}
        assert runner.stopped_by == {"RECONSTRUCTION_TIME_LIMIT": 1}
    finally:
        runner.close()


def test_a_refusal_crosses_from_the_worker_whole(basic: Case, runner: IsolatedRunner) -> None:
    servicer = ReconstructionServicer(runner=runner)
    pretty = json.dumps(json.loads(basic.checkpoint), indent=1).encode()
    request = reconstruction_pb2.ReconstructInvalidReadRequest(
        checkpoint=pretty,
        raw_response=basic.raw_response,
        version=reconstruction_pb2.RECONSTRUCTION_VERSION_V1,
        consumed_at=basic.consumed_at,
    )
    with pytest.raises(FailedPrecondition) as refused:
        servicer.ReconstructInvalidRead(request, None)
    assert refused.value.reason == "CHECKPOINT_NOT_CANONICAL"
    assert refused.value.metadata


def test_the_reconstruction_bounds_are_read_from_the_environment() -> None:
    assert reconstruction_bounds({}) == ReconstructionBounds()
    assert reconstruction_bounds(
        {"FORGE_RECONSTRUCTION_WORKERS": "4", "FORGE_RECONSTRUCTION_SECONDS": "2.5"}
    ) == ReconstructionBounds(workers=4, max_seconds=2.5)
    for bad in (
        {"FORGE_RECONSTRUCTION_WORKERS": "0"},
        {"FORGE_RECONSTRUCTION_SECONDS": "0"},
        {"FORGE_RECONSTRUCTION_SECONDS": "601"},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            reconstruction_bounds(bad)
