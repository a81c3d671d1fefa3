"""The ledger serves only a schema at the required revision; only the migration command upgrades.

Several ledger replicas start at once in a deployment: if each migrated on start-up they would
race. So ``python -m services.ledger`` checks the revision and exits non-zero on a stale schema,
and ``python -m services.ledger.migrate`` (the migration job, ``make db-upgrade``) upgrades.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.ledger.__main__ import EXIT_SCHEMA_STALE
from services.ledger.database import (
    current_revision,
    make_engine,
    require_current_schema,
    required_revision,
)
from shared.runtime.errors import FailedPrecondition
from tests.polyglot.process import running_ledger
from tests.support import principals_document

ROOT = Path(__file__).resolve().parents[2]


def _python_m(module: str, *arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FORGE_", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "shared" / "gen")])
    return subprocess.run(
        [sys.executable, "-m", module, *arguments],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_unmigrated_schema_is_refused_with_both_revisions(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path}/empty.db")
    try:
        with pytest.raises(FailedPrecondition) as stale:
            require_current_schema(engine)
    finally:
        engine.dispose()
    assert stale.value.reason == "SCHEMA_REVISION_STALE"
    assert stale.value.metadata == {
        "current_revision": "",
        "required_revision": required_revision(),
    }


def test_the_ledger_refuses_an_unmigrated_database_and_serves_after_the_migration(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/continuity.db"
    principals = tmp_path / "principals.json"
    principals.write_text(json.dumps(principals_document()), encoding="utf-8")
    flags = ("--port", "0", "--database-url", url, "--principals-file", str(principals))

    refused = _python_m("services.ledger", *flags, cwd=tmp_path)
    assert refused.returncode == EXIT_SCHEMA_STALE, refused.stdout + refused.stderr
    log = refused.stdout + refused.stderr
    assert "SCHEMA_REVISION_STALE" in log
    assert f"requires {required_revision()}" in log
    assert "never migrated" in log
    # The refusal wrote no schema: the ledger never migrates by itself.
    engine = make_engine(url)
    try:
        assert current_revision(engine) is None
    finally:
        engine.dispose()

    migrated = _python_m("services.ledger.migrate", "--database-url", url, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr

    with running_ledger(url, tmp_path) as running:
        assert running.process.poll() is None
