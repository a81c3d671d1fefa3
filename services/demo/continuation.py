"""`make demo`'s worker steps: the reference worker (``python -m services.worker``, its own
process with the worker token) continues an admitted run against the scripted provider on
loopback, in a small source tree with a recorded log as evidence."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.demo.scripted_provider import Script, ScriptedProvider, reference_script
from services.demo.seed import SEEDED_SOURCE_REVISION

ROOT = Path(__file__).resolve().parents[2]
#: The evidence run the held query names (the v1_basic fixture's rejected query).
EVIDENCE_RUN = "run-7f3a"
COMMANDS = (
    (sys.executable, "-m", "compileall", "-q", "src"),
    (sys.executable, "-m", "unittest", "discover", "-s", "tests", "-q"),
)
#: Seconds a whole continuation may take.
WORKER_SECONDS = 300


@dataclass(frozen=True)
class WorkerRun:
    """What the worker process printed and what the provider received."""

    returncode: int
    stdout: str
    stderr: str
    requests: list[dict[str, Any]]


def _source_tree(root: Path) -> None:
    (root / "src").mkdir()
    (root / "tests").mkdir()
    (root / "src" / "evidence.py").write_text("PAGE_MAX = 10\n")
    (root / "src" / "reader.py").write_text("def read(page: int) -> int:\n    return page\n")
    (root / "tests" / "test_reader.py").write_text(
        "import sys\nimport unittest\n\nsys.path.insert(0, 'src')\n\nimport reader\n\n\n"
        "class ReaderTest(unittest.TestCase):\n"
        "    def test_page(self) -> None:\n"
        "        self.assertEqual(reader.read(3), 3)\n"
    )


def prepare_workspace(workdir: Path, provider_url: str) -> dict[str, str]:
    """A source tree and evidence store under ``workdir``; the worker settings that use them
    with the scripted provider at ``provider_url`` and the commands its script runs."""
    source, evidence = workdir / "source", workdir / "evidence"
    shutil.rmtree(source, ignore_errors=True)
    shutil.rmtree(evidence, ignore_errors=True)
    source.mkdir(parents=True)
    _source_tree(source)
    (evidence / EVIDENCE_RUN).mkdir(parents=True)
    log = [{"line": n, "text": f"step-{n} finished"} for n in range(1, 12)]
    (evidence / EVIDENCE_RUN / "log.json").write_text(json.dumps(log))
    return {
        "FORGE_WORKER_PROVIDER_URL": provider_url,
        "FORGE_WORKER_PROVIDER_KEY": "demo-scripted-key",
        "FORGE_WORKER_SOURCE_DIR": str(source.resolve()),
        # The demo's tree stands in for the seeded run's checkout, so the worker declares that
        # revision instead of deriving its tree's (services.worker.source).
        "FORGE_WORKER_SOURCE_REVISION": SEEDED_SOURCE_REVISION,
        "FORGE_WORKER_EVIDENCE_DIR": str(evidence.resolve()),
        "FORGE_WORKER_GRANTED_COMMANDS": json.dumps([list(c) for c in COMMANDS]),
    }


@contextmanager
def worker_environment(
    ledger_target: str, worker_token: str, provider: ScriptedProvider
) -> Iterator[dict[str, str]]:
    """The environment of a reference worker process: a fresh source tree and evidence store
    (removed afterwards), the scripted provider, the granted commands."""
    with tempfile.TemporaryDirectory(prefix="forge-demo-worker-") as workdir:
        yield {
            **os.environ,
            "FORGE_LEDGER_TARGET": ledger_target,
            "FORGE_WORKER_TOKEN": worker_token,
            **prepare_workspace(Path(workdir), provider.base_url),
        }


def start_reference_worker(env: dict[str, str], run_id: str) -> subprocess.Popen[str]:
    """Start the reference worker on ``run_id``; the caller waits for it (or kills it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "services.worker", run_id, "--verbose"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_reference_worker(
    ledger_target: str, worker_token: str, run_id: str, script: Script | None = None
) -> WorkerRun:
    """Run the reference worker once on ``run_id`` and wait for it to finish."""
    with (
        ScriptedProvider(script or reference_script(COMMANDS)) as provider,
        worker_environment(ledger_target, worker_token, provider) as env,
    ):
        process = start_reference_worker(env, run_id)
        try:
            stdout, stderr = process.communicate(timeout=WORKER_SECONDS)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        return WorkerRun(process.returncode, stdout, stderr, provider.requests())
