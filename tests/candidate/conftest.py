"""A real ledger (SQLite and PostgreSQL), a real reconstruction server and real candidate servers
wired to both under the service identity, as `python -m services.candidate` wires them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import (
    candidate_pb2,
    candidate_pb2_grpc,
    common_pb2,
    ledger_pb2,
    ledger_pb2_grpc,
    policy_pb2,
    policy_pb2_grpc,
)
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings as candidate_bindings
from services.demo.seed import SeededRun, load_fixture, seed_held_run
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.contract.channels import open_channel
from tests.support import Served, row_counts, serve

# The candidate servers' clock: handoff deadlines are computed against it.
NOW = datetime(2026, 10, 20, 12, 0, tzinfo=UTC)
Candidate = candidate_pb2.InvalidReadContinuityCandidate


@pytest.fixture(scope="module")
def reconstruction_server() -> Iterator[Served]:
    with serve("reconstruction", reconstruction_bindings()) as served:
        yield served


@dataclass
class Stack:
    """The served services and the stubs a test drives them with."""

    ledger_served: Served
    reconstruction_served: Served
    candidate_served: Served
    engine: Engine

    def writer(self) -> ledger_pb2_grpc.LedgerServiceStub:
        return ledger_pb2_grpc.LedgerServiceStub(self.ledger_served.channel("writer-token"))

    def ledger(self, token: str = "reader-token") -> ledger_pb2_grpc.LedgerServiceStub:
        return ledger_pb2_grpc.LedgerServiceStub(self.ledger_served.channel(token))

    def policy(self, token: str = "admin-token") -> policy_pb2_grpc.PolicyServiceStub:
        return policy_pb2_grpc.PolicyServiceStub(self.ledger_served.channel(token))

    def candidates(
        self, token: str = "operator-token", served: Served | None = None
    ) -> candidate_pb2_grpc.CandidateServiceStub:
        return candidate_pb2_grpc.CandidateServiceStub(
            (served or self.candidate_served).channel(token)
        )

    def read(
        self, run_id: str, token: str = "operator-token", served: Served | None = None
    ) -> Candidate:
        return (
            self.candidates(token, served)
            .GetInvalidReadContinuityCandidate(
                candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_id)
            )
            .candidate
        )

    def set_policy(self, enabled: bool = True, window_seconds: int = 3600) -> common_pb2.Policy:
        stub = self.policy()
        current = stub.GetPolicy(policy_pb2.GetPolicyRequest()).policy
        return stub.PutPolicy(
            policy_pb2.PutPolicyRequest(
                expected_revision=current.revision,
                settings=common_pb2.PolicySettings(enabled=enabled, window_seconds=window_seconds),
            )
        ).policy

    def seed(self, fixture: str, run_id: str, **options: Any) -> SeededRun:
        return seed_held_run(self.writer(), load_fixture(fixture), run_id, **options)

    def head(self, run_id: str) -> common_pb2.JournalHead:
        return self.ledger().GetRun(ledger_pb2.GetRunRequest(run_id=run_id)).head

    def row_counts(self) -> dict[str, int]:
        return row_counts(self.engine)

    @contextmanager
    def another_candidate_server(self) -> Iterator[Served]:
        """A second, independent candidate server over the same ledger and reconstruction."""
        with _candidate_server(self.ledger_served, self.reconstruction_served) as served:
            yield served


@contextmanager
def _candidate_server(ledger: Served, reconstruction: Served) -> Iterator[Served]:
    ledger_channel = open_channel(ledger.target, "candidate-service-token")
    reconstruction_channel = open_channel(reconstruction.target, "candidate-service-token")
    sources = GrpcCandidateSources(ledger_channel, reconstruction_channel)
    try:
        with serve("candidate", candidate_bindings(sources, clock=lambda: NOW)) as served:
            yield served
    finally:
        ledger_channel.close()
        reconstruction_channel.close()


@pytest.fixture
def stack(ledger: Ledger, engine: Engine, reconstruction_server: Served) -> Iterator[Stack]:
    with (
        serve("ledger", ledger_bindings(ledger)) as ledger_served,
        _candidate_server(ledger_served, reconstruction_server) as candidate_served,
    ):
        yield Stack(ledger_served, reconstruction_server, candidate_served, engine)


def hold_pairs(candidate: Candidate) -> set[tuple[str, str]]:
    """{(reason name without prefix, subject)} of a candidate's holds."""
    return {
        (common_pb2.HoldReason.Name(h.reason).removeprefix("HOLD_REASON_"), h.subject)
        for h in candidate.holds
    }


def hold_reasons(candidate: Candidate) -> set[str]:
    return {reason for reason, _ in hold_pairs(candidate)}


def requirements(candidate: Candidate) -> dict[str, str]:
    """reason → requirement name (both without prefix)."""
    return {
        common_pb2.HoldReason.Name(h.reason).removeprefix("HOLD_REASON_"): (
            common_pb2.HoldRequirement.Name(h.requirement).removeprefix("HOLD_REQUIREMENT_")
        )
        for h in candidate.holds
    }


def actions(candidate: Candidate) -> list[str]:
    return [a.action for a in candidate.handoff.permitted_next_actions]
