"""Real servers and small helpers for the client and CLI tests."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pytest

from forge.continuity.v1 import ledger_pb2_grpc
from services.client import ContinuityClient
from services.client.cli import main
from services.demo.seed import SeededRun, load_fixture, seed_held_run
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from tests.support import Served, serve


@pytest.fixture
def closed_target() -> str:
    """A loopback address nothing listens on: any call sent there fails as UNAVAILABLE."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"127.0.0.1:{port}"


@pytest.fixture
def ledger_served(ledger: Ledger) -> Iterator[Served]:
    """The real ledger process bindings (LedgerService, PolicyService, ExecutionService)."""
    with serve("ledger", ledger_bindings(ledger)) as served:
        yield served


ClientFactory = Callable[[str], ContinuityClient]


@pytest.fixture
def client_for(ledger_served: Served, closed_target: str) -> Iterator[ClientFactory]:
    """A client for ``token`` on the ledger (candidate and admission point at a closed port)."""
    opened: list[ContinuityClient] = []

    def make(token: str) -> ContinuityClient:
        client = ContinuityClient(
            token,
            ledger_target=ledger_served.target,
            candidate_target=closed_target,
            admission_target=closed_target,
            timeout=10.0,
        )
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.close()


def seed(served: Served, run_id: str = "run-1", **options: object) -> SeededRun:
    """A held run written as the platform's workers would (11 of 22 commands used)."""
    writer = ledger_pb2_grpc.LedgerServiceStub(served.channel("writer-token"))
    return seed_held_run(writer, load_fixture("v1_basic"), run_id, **options)  # type: ignore[arg-type]


@dataclass
class CliResult:
    code: int
    out: str
    err: str


CliRunner = Callable[..., CliResult]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], closed_target: str) -> CliRunner:
    """Run the CLI in-process: ``cli("policy", "show", token=..., ledger=...)``."""

    def run(
        *argv: str,
        token: str | None = "reader-token",
        ledger: str | None = None,
        candidate: str | None = None,
        admission: str | None = None,
        env: dict[str, str] | None = None,
    ) -> CliResult:
        options: list[str] = []
        if token is not None:
            options += ["--token", token]
        options += ["--ledger", ledger or closed_target]
        options += ["--candidate", candidate or closed_target]
        options += ["--admission", admission or closed_target]
        capsys.readouterr()
        code = main([*options, *argv], env=env or {})
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def lines(text: str) -> Sequence[str]:
    return [line for line in text.splitlines() if line.strip()]
