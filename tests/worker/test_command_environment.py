"""A granted command runs with a scrubbed environment: the worker's ledger token and provider key
are never inherited by a command the model asked for (issue 45 §3)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from services.worker.config import PROVIDER_KEY, TOKEN
from services.worker.effects import SourceEffects

SHOW_ENVIRONMENT = (sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))")


def test_a_granted_command_inherits_neither_token_nor_provider_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN, "worker-ledger-token")
    monkeypatch.setenv(PROVIDER_KEY, "sk-provider-key")
    monkeypatch.setenv("SOME_OTHER_SECRET", "s3cret")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    effects = SourceEffects(
        root=tmp_path,
        evidence=None,
        granted_commands=frozenset({SHOW_ENVIRONMENT}),  # type: ignore[arg-type]
    )
    result = effects.run_command(SHOW_ENVIRONMENT)
    seen = json.loads(result["stdout"])
    assert TOKEN not in seen and PROVIDER_KEY not in seen and "SOME_OTHER_SECRET" not in seen
    assert "worker-ledger-token" not in result["stdout"]
    assert seen["PATH"] == "/usr/bin:/bin"
