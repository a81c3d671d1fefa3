"""Fixtures of the polyglot tests: the real ledger process on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.polyglot.process import LedgerProcess, running_ledger


@pytest.fixture
def ledger_process(database_url: str, tmp_path: Path) -> Iterator[LedgerProcess]:
    """``python -m services.ledger`` on a fresh SQLite file or PostgreSQL schema (the shared
    ``database_url`` fixture), SERVING; SIGTERM at teardown must end it with exit code 0 in 15 s."""
    with running_ledger(database_url, tmp_path) as running:
        yield running
