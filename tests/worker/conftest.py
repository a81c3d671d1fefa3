"""The reference worker against the four real services on loopback (SQLite and PostgreSQL) and
the scripted provider over real HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from forge.continuity.v1 import common_pb2, execution_pb2, execution_pb2_grpc, ledger_pb2
from services.demo.scripted_provider import ScriptedProvider, reference_script
from services.demo.seed import load_fixture, seed_held_run
from services.worker.config import WorkerConfig
from services.worker.ledger_port import LedgerPort
from services.worker.run import Outcome, run_once
from services.worker.source import source_revision
from tests.admission.conftest import (
    Stack,
    stack,  # noqa: F401 - the four services, over `ledger`
    submission,
)
from tests.support import whole_journal

FIXTURE = load_fixture("v1_basic")
RUN = "run-1"
#: The evidence run the held query names (tests/data/fixtures/v1_basic/raw_response.json).
EVIDENCE_RUN = "run-7f3a"
LOG = [{"line": n, "text": f"step {n} finished"} for n in range(1, 26)]
#: Commands the scripted model asks for; each leaves a marker file so a test sees it ran.
COMMANDS = (
    (sys.executable, "-c", "open('ran-1', 'w').close()"),
    (sys.executable, "-c", "open('ran-2', 'w').close()"),
)


@dataclass
class Continuation:
    """An admitted continuation and what the worker needs to continue it."""

    stack: Stack
    ticket: ledger_pb2.AdmissionTicket
    source: Path
    config: WorkerConfig
    echoed: list[common_pb2.JournalEntry] = field(default_factory=list)

    def run(self, provider: ScriptedProvider, **overrides: Any) -> Outcome:
        config = replace(self.config, provider_url=provider.base_url, **overrides)
        port = LedgerPort(config.ledger_target, config.token)
        try:
            return run_once(config, port, self.echoed.append)
        finally:
            port.close()

    def journal(self) -> list[common_pb2.JournalEntry]:
        stub = self.stack.ledger_stub("reader-token")
        return list(whole_journal(stub, RUN))

    def after_claim(self) -> list[tuple[str, dict[str, Any]]]:
        """(kind, payload) of every entry from the worker's claim on."""
        entries = self.journal()
        start = max(
            i
            for i, e in enumerate(entries)
            if e.kind == common_pb2.JOURNAL_ENTRY_KIND_WORKER_CLAIMED
        )
        return [(kind_name(e), json.loads(e.payload_json)) for e in entries[start:]]

    def execution(self, token: str = "worker-token") -> execution_pb2_grpc.ExecutionServiceStub:
        return execution_pb2_grpc.ExecutionServiceStub(self.stack.ledger.channel(token))

    def request(self) -> common_pb2.ExecutionRequest:
        return (
            self.execution()
            .GetExecutionRequest(
                execution_pb2.GetExecutionRequestRequest(
                    execution_request_id=self.ticket.execution_request.execution_request_id
                )
            )
            .execution_request
        )

    def usage(self) -> tuple[int, int]:
        usage = (
            self.execution().GetCommandUsage(execution_pb2.GetCommandUsageRequest(run_id=RUN)).usage
        )
        return usage.used, usage.limit

    def run_record(self) -> ledger_pb2.Run:
        stub = self.stack.ledger_stub("reader-token")
        return stub.GetRun(ledger_pb2.GetRunRequest(run_id=RUN)).run


def kind_name(entry: common_pb2.JournalEntry) -> str:
    return common_pb2.JournalEntryKind.Name(entry.kind).removeprefix("JOURNAL_ENTRY_KIND_").lower()


def source_tree(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "src" / "app.py").write_text("def answer() -> int:\n    return 42\n")
    (root / "src" / "util.py").write_text("NAME = 'forge'\n")
    (root / "tests" / "test_app.py").write_text("def test_answer() -> None:\n    pass\n")
    commit_tree(root)
    return root


def commit_tree(root: Path) -> None:
    """Make ``root`` a git checkout of what it holds: the worker presents its HEAD, which the
    files its commands leave behind do not change."""
    identity = ["-c", "user.name=forge-tests", "-c", "user.email=tests@forge.invalid"]
    for argv in (["init", "-q"], ["add", "-A"], [*identity, "commit", "-q", "-m", "source"]):
        subprocess.run(["git", "-C", str(root), *argv], check=True, capture_output=True)


def admit(
    services: Stack,
    tmp_path: Path,
    *,
    commands_before: int = 11,
    granted: Sequence[Sequence[str]] = COMMANDS,
    window_seconds: int = 3600,
) -> Continuation:
    # the run records the revision its worker derives from the source tree it runs in
    source = source_tree(tmp_path / "source")
    seed_held_run(
        services.ledger_stub(),
        FIXTURE,
        RUN,
        commands_before=commands_before,
        source_revision=source_revision(source),
    )
    services.set_policy(window_seconds=window_seconds)
    candidate = services.candidate_of(RUN)
    assert candidate.eligible, candidate.holds
    ticket = services.admissions().RequestInvalidReadContinuity(submission(candidate)).ticket
    evidence = tmp_path / "evidence" / EVIDENCE_RUN
    evidence.mkdir(parents=True)
    (evidence / "log.json").write_text(json.dumps(LOG))
    config = WorkerConfig(
        ledger_target=services.ledger.target,
        token="worker-token",
        run_ids=(RUN,),
        provider_url="",
        provider_key="scripted-key",
        source_dir=source,
        evidence_dir=tmp_path / "evidence",
        granted_commands=frozenset(tuple(c) for c in granted),
    )
    return Continuation(services, ticket, source, config)


@pytest.fixture
def admitted(stack: Stack, tmp_path: Path) -> Continuation:  # noqa: F811 - the imported fixture
    return admit(stack, tmp_path)


@pytest.fixture
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(reference_script(COMMANDS)) as running:
        yield running
