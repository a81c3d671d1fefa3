"""Services as real processes that can be SIGKILLed and restarted on the same port.

It reuses the start-up pieces of tests/polyglot/process.py (free port, child environment,
health check); unlike ``running_ledger`` it expects to be killed. :class:`ServiceProcess` runs
any of the four services (``python -m services.<name>``, as ``make run`` starts them);
:class:`KillableLedger` is the ledger on one database.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import cast

import grpc

from shared.runtime.readiness import answers
from shared.runtime.server import RunningServer
from tests.ledger.conftest import LedgerClients
from tests.polyglot.process import _child_environment, _free_port, _serving
from tests.support import Served, principals_document

STARTUP_SECONDS = 60.0


class ServiceProcess:
    """``python -m services.<service>`` on one port, across restarts, with the test principals
    (``workdir/principals.json``) and its log in ``workdir/<label>-<start>.log``."""

    def __init__(
        self,
        service: str,
        workdir: Path,
        *,
        label: str = "",
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.service = service
        self.label = label or service
        self.workdir = workdir
        self.args = list(args)
        self.env = dict(env or {})
        self.port = _free_port()
        self.target = f"127.0.0.1:{self.port}"
        self.principals = workdir / "principals.json"
        if not self.principals.exists():
            self.principals.write_text(json.dumps(principals_document()), encoding="utf-8")
        self.starts = 0
        self.process: subprocess.Popen[bytes] | None = None

    def served(self) -> Served:
        return Served(cast(RunningServer, None), self.target)

    def serving(self) -> bool:
        """The service and everything it calls answer SERVING (shared.runtime.readiness)."""
        with grpc.insecure_channel(self.target) as channel:
            return answers(channel, timeout=1)

    def log(self) -> str:
        path = self.workdir / f"{self.label}-{self.starts - 1}.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def start(self) -> None:
        self.launch()
        self.wait_serving()

    def launch(self) -> None:
        """Start the process without waiting (several can come up together: each reports
        SERVING only once what it calls does)."""
        log = (self.workdir / f"{self.label}-{self.starts}.log").open("wb")
        command = [sys.executable, "-m", f"services.{self.service}", "--port", str(self.port)]
        self.process = subprocess.Popen(
            [*command, "--principals-file", str(self.principals), *self.args],
            cwd=self.workdir,
            env={**_child_environment(), **self.env},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.starts += 1

    def wait_serving(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + STARTUP_SECONDS
        while not self.serving():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.label} did not come up (start {self.starts}):\n{self.log()}"
                )
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no graceful drain, transactions cut wherever they are."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def freeze(self) -> None:
        """SIGSTOP: the process keeps its connections and sessions but runs nothing, as a
        replica paused by its host, a debugger or a long GC would."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT after :meth:`freeze`."""
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a frozen process cannot act on SIGTERM
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class KillableLedger(ServiceProcess):
    """``python -m services.ledger`` on one database and one port, across restarts."""

    def __init__(
        self,
        database_url: str,
        workdir: Path,
        *,
        label: str = "ledger",
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            "ledger", workdir, label=label, args=["--database-url", database_url], env=env
        )
        self.database_url = database_url

    def clients(self) -> LedgerClients:
        return LedgerClients(self.served())

    def serving(self) -> bool:
        """Every service the ledger hosts answers SERVING, not only the server as a whole."""
        return _serving(self.target)
