"""Host controls: the reference worker as its own process (``python -m services.worker``, as in
production) against the four real services on SQLite and PostgreSQL, with the scripted
provider on loopback keeping every byte it received.

``make host-controls`` sets ``FORGE_HOST_CONTROLS=full`` and runs every variant; ``make test``
runs a fast slice: every control on both databases, the first variant of each.

The services, the admitted continuation and the provider are the reference worker's own test
fixtures (``tests/worker/conftest.py``); this module adds the worker process, a ledger whose clock
the tests can move, the authority source and the local-process verifier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import Engine

from services.demo.scripted_provider import HeldTurn, Message, Script, ScriptedProvider
from services.ledger.local_process_verifier import LocalProcessVerifier
from services.ledger.service import Ledger
from services.worker import config as settings
from shared.continuity.timeutil import utc_now
from tests.admission.conftest import stack  # noqa: F401 - the four services, over `ledger`
from tests.recovery.conftest import Authority
from tests.worker.conftest import (  # noqa: F401 - fixtures reused as they are
    Continuation,
    admitted,
    provider,
)

ROOT = Path(__file__).resolve().parents[2]
FULL = os.environ.get("FORGE_HOST_CONTROLS") == "full"
#: Seconds a worker process may take to finish a whole continuation.
WORKER_SECONDS = 240
T = TypeVar("T")


def variants(*cases: T) -> Sequence[T]:
    """Every case under ``make host-controls``; the first one in ``make test``'s slice."""
    return cases if FULL else cases[:1]


class MovableClock:
    """Wall-clock time plus an offset the test moves forward (the ledger's clock only: a lease
    expires while everything else keeps real time)."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return utc_now() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> MovableClock:
    return MovableClock()


@pytest.fixture
def authority() -> Authority:
    return Authority()


@pytest.fixture
def ledger(engine: Engine, clock: MovableClock, authority: Authority) -> Ledger:
    """The ledger as ``make run`` configures it: the local-process verifier, on this host."""
    return Ledger(engine, clock, authority=authority, verifier=LocalProcessVerifier())


@dataclass
class Finished:
    """How a worker process ended."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def message(self) -> str:
        return (self.stdout + self.stderr).strip().splitlines()[-1]


@dataclass
class WorkerProcess:
    """A reference worker process the test started."""

    popen: subprocess.Popen[str]

    @property
    def pid(self) -> int:
        return self.popen.pid

    def finish(self, timeout: float = WORKER_SECONDS) -> Finished:
        stdout, stderr = self.popen.communicate(timeout=timeout)
        return Finished(self.popen.returncode, stdout, stderr)

    def kill(self) -> Finished:
        """SIGKILL: the owner is lost mid-run, nothing of it runs any more."""
        self.popen.kill()
        return self.finish(timeout=30)


@dataclass
class Workers:
    """Starts reference worker processes for one continuation; kills leftovers at teardown."""

    continuation: Continuation
    started: list[WorkerProcess] = field(default_factory=list)

    def start(
        self,
        model: ScriptedProvider,
        *,
        token: str = "worker-token",
        env: dict[str, str] | None = None,
        args: Sequence[str] = (),
        cwd: Path = ROOT,
    ) -> WorkerProcess:
        """``cwd``: where ``python -m services.worker`` finds the code (another installation)."""
        config = self.continuation.config
        assert config.evidence_dir is not None
        environment = {
            **os.environ,
            "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'shared' / 'gen'}",
            "FORGE_LEDGER_TARGET": config.ledger_target,
            settings.TOKEN: token,
            settings.PROVIDER_URL: model.base_url,
            settings.PROVIDER_KEY: config.provider_key,
            settings.SOURCE_DIR: str(config.source_dir),
            settings.EVIDENCE_DIR: str(config.evidence_dir),
            settings.GRANTED_COMMANDS: json.dumps([list(c) for c in config.granted_commands]),
            **(env or {}),
        }
        popen = subprocess.Popen(
            [sys.executable, "-m", "services.worker", *config.run_ids, "--verbose", *args],
            cwd=cwd,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        process = WorkerProcess(popen)
        self.started.append(process)
        return process

    def run(self, model: ScriptedProvider, **options: Any) -> Finished:
        return self.start(model, **options).finish()

    def stop_all(self) -> None:
        for process in self.started:
            if process.popen.poll() is None:
                process.kill()


@pytest.fixture
def workers(admitted: Continuation) -> Iterator[Workers]:  # noqa: F811 - the imported fixture
    started = Workers(admitted)
    try:
        yield started
    finally:
        started.stop_all()


class Gate(HeldTurn):
    """A held turn that fails the test when its request never arrives."""

    def wait(self, timeout: float = WORKER_SECONDS) -> bool:
        assert super().wait(timeout), f"request {self.at} never arrived"
        return True


@pytest.fixture
def gates() -> Iterator[list[Gate]]:
    """Gates a test opens; every one is released at teardown so no provider thread stays."""
    opened: list[Gate] = []
    yield opened
    for gate in opened:
        gate.released.set()


def before_answering(script: Script, hooks: dict[int, Callable[[], None]]) -> Script:
    """``script`` running ``hooks[index]`` before it answers request ``index``."""

    def turn(index: int, body: dict[str, Any]) -> Message:
        hook = hooks.get(index)
        if hook is not None:
            hook()
        return script(index, body)

    return turn
