"""The candidate domain on its own: a consistent read, and no transport in the domain."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path

import pytest

from forge.continuity.v1 import common_pb2
from services.candidate.domain import (
    CandidateEvaluator,
    ChainVerification,
    Entry,
    ExecutionRecord,
    HoldReason,
    JournalHead,
    PolicyRecord,
    Reconstruction,
    Requirement,
    ResponseAnalysis,
    RunRecord,
)
from shared.continuity.canonical import GENESIS_HASH
from shared.contract.terms import enum_number, enum_short_name
from shared.runtime.errors import Aborted, InvalidArgument

DOMAIN = Path(__file__).resolve().parents[2] / "services" / "candidate" / "domain"
RUN = RunRecord(
    run_id="run-1",
    task_id="task-1",
    attempt_id="attempt-1",
    source_revision="git:1",
    configuration_digest="sha256:" + "c" * 64,
    provider_timeout_seconds=900,
    active_deadline=None,
    command_limit=22,
    time_budget_protocol="provider-timeout-v1",
    source_profile="profile",
    run_digest="sha256:" + "d" * 64,
)


class MovingJournal:
    """An empty journal whose head moves on every read until ``settle_after`` reads."""

    def __init__(self, settle_after: int) -> None:
        self.reads = 0
        self.settle_after = settle_after

    def _head(self) -> JournalHead:
        self.reads += 1
        if self.reads >= self.settle_after:
            return JournalHead(0, GENESIS_HASH)
        return JournalHead(self.reads, "sha256:" + f"{self.reads:064x}")

    def run(self, run_id: str) -> tuple[RunRecord, JournalHead]:
        return RUN, self._head()

    def journal(self, run_id: str) -> tuple[Sequence[Entry], JournalHead]:
        return [], self._head()

    def verify(self, run_id: str) -> ChainVerification:
        return ChainVerification(True, 0, "", JournalHead(0, GENESIS_HASH))

    def policy(self) -> PolicyRecord:
        return PolicyRecord(1, True, "sha256:" + "e" * 64, False)

    def execution_requests(self, run_id: str) -> Sequence[ExecutionRecord]:
        return []

    def blob(self, digest: str) -> bytes | None:
        raise AssertionError("no blob is named")

    def analyze(self, checkpoint: bytes, raw_response: bytes) -> ResponseAnalysis:
        raise AssertionError("nothing to analyze")

    def reconstruct(
        self, checkpoint: bytes, raw_response: bytes, version: int, consumed_at: str
    ) -> Reconstruction:
        raise AssertionError("nothing to reconstruct")


def test_a_journal_that_keeps_moving_is_aborted_for_a_retry() -> None:
    with pytest.raises(Aborted) as caught:
        CandidateEvaluator(MovingJournal(settle_after=100)).invalid_read_continuity("run-1")
    assert caught.value.reason == "JOURNAL_CHANGED_DURING_READ"


def test_a_journal_that_settles_is_read_at_one_head() -> None:
    candidate = CandidateEvaluator(MovingJournal(settle_after=3)).invalid_read_continuity("run-1")
    assert candidate.journal_head == JournalHead(0, GENESIS_HASH)
    assert not candidate.eligible


def test_only_versions_1_and_2_are_evaluated() -> None:
    with pytest.raises(InvalidArgument):
        CandidateEvaluator(MovingJournal(settle_after=1)).invalid_read_continuity("run-1", 3)


def test_the_domain_imports_no_transport() -> None:
    for path in DOMAIN.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert not name.startswith(("grpc", "forge", "google.protobuf")), (path, name)


def test_every_domain_hold_reason_and_requirement_is_a_contract_value() -> None:
    """The servicer translates by name (shared.contract.terms): every domain value must exist in the
    contract (the contract also has the recovery workflows' reasons)."""
    for domain, contract in (
        (HoldReason, common_pb2.HoldReason),
        (Requirement, common_pb2.HoldRequirement),
    ):
        named = {enum_short_name(contract, n) for n in contract.values()} - {"UNSPECIFIED"}
        assert {member.value for member in domain} <= named
        for member in domain:
            assert enum_short_name(contract, enum_number(contract, member.value)) == member.value
