"""Host control of an incompatible tool-contract change (ADR 0039): a worker deployed with a
worker adapter whose tool contract differs from the code its profile registers (here a read tool
regranted as a command) derives its installed profile digest as the services do, finds it is not
the registered one, and claims nothing: no provider request, nothing written, the request stays
queued for a compatible worker. Real worker processes, SQLite and PostgreSQL."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from forge.continuity.v1 import common_pb2
from services.demo.scripted_provider import ScriptedProvider
from services.worker.run import EXIT_NOT_QUALIFIED
from shared.continuity.qualification import PROFILES_FILE_VARIABLE, registry_document
from tests.host_controls.conftest import ROOT, Workers
from tests.worker.conftest import Continuation

GRANT_LINE = '    "read_file": "read",\n'


def changed_installation(target: Path) -> Path:
    """A copy of the installed code whose worker adapter grants ``read_file`` as a command."""
    for package in ("services", "shared"):
        shutil.copytree(
            ROOT / package, target / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    agent = target / "shared" / "agent" / "agent.py"
    text = agent.read_text(encoding="utf-8")
    assert GRANT_LINE in text
    agent.write_text(text.replace(GRANT_LINE, '    "read_file": "command",\n'), encoding="utf-8")
    return target


def test_a_worker_with_a_changed_tool_contract_claims_nothing(
    admitted: Continuation, workers: Workers, provider: ScriptedProvider, tmp_path: Path
) -> None:
    # The release's registration: the profile names the code the services run.
    registered = tmp_path / "qualified-profiles.json"
    registered.write_text(json.dumps(registry_document()), encoding="utf-8")
    installed = changed_installation(tmp_path / "installed")
    journal = admitted.journal()
    finished = workers.run(
        provider,
        env={
            PROFILES_FILE_VARIABLE: str(registered),
            "PYTHONPATH": f"{installed}:{installed / 'shared' / 'gen'}",
        },
        cwd=installed,
    )
    assert finished.returncode == EXIT_NOT_QUALIFIED, finished.stdout + finished.stderr
    assert "PROFILE_NOT_QUALIFIED" in finished.message
    assert "reconstruction code differs" in finished.message
    assert provider.received == []
    assert admitted.journal() == journal
    assert admitted.request().state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED
