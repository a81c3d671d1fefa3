"""The version-2 candidate holds when the published historical source reader its proof pins is
not installed with its pinned hash (reconstruction's SOURCE_READER_UNPINNED refusal becomes a
hold with its handoff)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from forge.continuity.v1 import candidate_pb2, common_pb2, policy_pb2
from services.reconstruction.isolation import InProcessRunner
from services.reconstruction.servicer import ReconstructionServicer
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.agent import historical
from tests.candidate.conftest import Candidate, Stack, actions, hold_pairs
from tests.support import Served, serve


@pytest.fixture
def reconstruction_server() -> Iterator[Served]:
    """A reconstruction service of this test's own: its result cache starts empty, so the
    reconstruction runs under the source reader as installed now, in this process (where the
    test changes it)."""
    servicer = ReconstructionServicer(runner=InProcessRunner())
    with serve("reconstruction", reconstruction_bindings(servicer)) as served:
        yield served


def read_v2(stack: Stack, run_id: str) -> Candidate:
    return (
        stack.candidates()
        .GetInvalidReadContinuityCandidate(
            candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_id, version=2)
        )
        .candidate
    )


def allow_observations(stack: Stack) -> None:
    stub = stack.policy()
    current = stub.GetPolicy(policy_pb2.GetPolicyRequest()).policy
    stub.PutPolicy(
        policy_pb2.PutPolicyRequest(
            expected_revision=current.revision,
            settings=common_pb2.PolicySettings(
                enabled=True, window_seconds=3600, allow_unavailable_source_observations=True
            ),
        )
    )


def test_an_absent_source_reader_holds_the_version_2_candidate(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    allow_observations(stack)
    stack.seed("v2_list_sibling", "run-v2")
    monkeypatch.setattr(historical, "SOURCE_READER_FILE", tmp_path / "absent.py")
    held = read_v2(stack, "run-v2")
    assert not held.eligible
    reasons = {reason for reason, _ in hold_pairs(held)}
    assert reasons == {"IDENTITY_UNREGISTERED"}
    assert any("SOURCE_READER_UNPINNED" in h.detail for h in held.holds)
    assert "qualify_source_profile" in actions(held)
    monkeypatch.undo()
    eligible = read_v2(stack, "run-v2")
    assert eligible.eligible, eligible.holds
