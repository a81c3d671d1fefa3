"""`make run`'s process for the tests that need the whole local stack: ``python -m
services.runner`` started in a subprocess on free ports, every line it (and the services, which
share its stdout) prints collected, waited for until its ready line, and stopped on exit."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The line the runner prints once every service and the gateway serve.
READY = "forge continuity ready:"
#: How long a stopped runner may take to stop its services before it is killed.
STOP_SECONDS = 40


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def runner_env(tmp_path: Path) -> dict[str, str]:
    """This process's environment with the runner's state (database, principals, signing key,
    log file) under ``tmp_path``."""
    return {
        **os.environ,
        "PYTHONPATH": f"{ROOT}:{ROOT / 'shared' / 'gen'}",
        "FORGE_DATABASE_URL": f"sqlite:///{tmp_path}/continuity.db",
        "FORGE_PRINCIPALS_FILE": str(tmp_path / "principals.json"),
        "FORGE_SIGNING_KEY_FILE": str(tmp_path / "signing-key.pem"),
        "FORGE_LOG_FILE": str(tmp_path / "var" / "continuity.log"),
    }


@dataclass
class Output:
    """Every line the runner (and the services, which share its stdout) printed so far."""

    lines: list[str] = field(default_factory=list)

    def collect(self, stream: Iterator[str]) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_for_event(self, text: str, deadline: float) -> str:
        """The event line containing ``text`` (the part after the log prefix)."""
        while time.monotonic() < deadline:
            for line in self.lines:
                if text in line:
                    return line[line.index("event=") :]
            time.sleep(0.2)
        raise AssertionError(f"no event {text!r}:\n" + "\n".join(self.lines[-40:]))

    def wait_for(
        self, prefix: str, deadline: float, process: subprocess.Popen[str] | None = None
    ) -> str:
        """The first line starting with ``prefix``; an AssertionError at ``deadline``, or as soon
        as ``process`` (the one printing) has exited without it."""
        while time.monotonic() < deadline:
            found = [line for line in self.lines if line.startswith(prefix)]
            if found:
                return found[0]
            if process is not None and process.poll() is not None:
                time.sleep(0.5)  # the reader takes the last lines
                break
            time.sleep(0.2)
        raise AssertionError(f"no line starting {prefix!r}:\n" + "\n".join(self.lines[-40:]))


@contextmanager
def running_runner(
    arguments: Sequence[str],
    env: Mapping[str, str],
    *,
    startup_seconds: float,
    graceful_stop: bool = True,
) -> Iterator[tuple[subprocess.Popen[str], Output]]:
    """The runner with ``arguments`` (its flags) and ``env``, once it printed its ready line.
    On exit SIGTERM, which must stop it and its children within STOP_SECONDS (else it is killed);
    without ``graceful_stop`` it is killed at once (a test that stops it itself)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "services.runner", *arguments],
        cwd=ROOT,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    output = Output()
    assert process.stdout is not None
    reader = threading.Thread(target=output.collect, args=(process.stdout,), daemon=True)
    reader.start()
    try:
        output.wait_for(READY, time.monotonic() + startup_seconds, process)
        yield process, output
    finally:
        if process.poll() is None:
            if graceful_stop:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            else:
                process.kill()
                process.wait()
        reader.join(timeout=10)
