"""The ledger as a real process that can be SIGKILLed and restarted on the same port.

It reuses the start-up pieces of tests/polyglot/process.py (free port, child environment,
health check); unlike ``running_ledger`` it expects to be killed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

from shared.runtime.server import RunningServer
from tests.ledger.conftest import LedgerClients
from tests.polyglot.process import _child_environment, _free_port, _serving
from tests.support import Served, principals_document

STARTUP_SECONDS = 60.0


class KillableLedger:
    """``python -m services.ledger`` on one database and one port, across restarts."""

    def __init__(self, database_url: str, workdir: Path) -> None:
        self.database_url = database_url
        self.workdir = workdir
        self.port = _free_port()
        self.target = f"127.0.0.1:{self.port}"
        self.principals = workdir / "principals.json"
        self.principals.write_text(json.dumps(principals_document()), encoding="utf-8")
        self.starts = 0
        self.process: subprocess.Popen[bytes] | None = None

    def clients(self) -> LedgerClients:
        return LedgerClients(Served(cast(RunningServer, None), self.target))

    def start(self) -> None:
        log = (self.workdir / f"ledger-{self.starts}.log").open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "services.ledger",
                "--port",
                str(self.port),
                "--database-url",
                self.database_url,
                "--principals-file",
                str(self.principals),
            ],
            cwd=self.workdir,
            env=_child_environment(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.starts += 1
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _serving(self.target):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the ledger did not come up (start {self.starts})")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no graceful drain, transactions cut wherever they are."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
