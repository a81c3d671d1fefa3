"""The suite runs only against a dedicated PostgreSQL test database and never skips its
PostgreSQL variants silently: a database not named ``*_test`` is refused, an unreachable server
fails the run (``FORGE_TEST_POSTGRES=optional`` outside CI skips them, saying so)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import POSTGRES_REQUIREMENT, dedicated_database_problem

ROOT = Path(__file__).resolve().parent.parent
UNREACHABLE = "postgresql+psycopg://postgres@127.0.0.1:1/forge_continuity_test"


@pytest.mark.parametrize(
    ("name", "dedicated"),
    [
        ("forge_continuity_test", True),
        ("ledger_test", True),
        ("test", False),
        ("_test", False),
        ("postgres", False),
        ("forge_continuity", False),
    ],
)
def test_only_a_database_named_as_a_test_one_is_dedicated(name: str, dedicated: bool) -> None:
    problem = dedicated_database_problem(f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}")
    assert (problem is None) == dedicated, problem


def session(url: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A pytest session of one database-free test against ``url``."""
    environment = {k: v for k, v in os.environ.items() if k not in ("CI", POSTGRES_REQUIREMENT)}
    environment.update(FORGE_TEST_POSTGRES_URL=url, **env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", f"{__file__}::test_a_session_may_start"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_session_may_start() -> None:
    """The test the sessions below run: it needs no database."""


def test_a_shared_database_is_refused_before_anything_runs() -> None:
    refused = session("postgresql+psycopg://postgres@127.0.0.1:5432/test")
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR, refused.stdout
    assert "the test database 'test' is not a dedicated one" in refused.stderr


def test_an_unreachable_postgresql_fails_the_run_unless_declared_optional() -> None:
    failed = session(UNREACHABLE)
    assert failed.returncode == pytest.ExitCode.USAGE_ERROR, failed.stdout
    assert "is unreachable" in failed.stderr and "make test-database" in failed.stderr
    # declared optional on a machine without PostgreSQL: the session runs ...
    optional = session(UNREACHABLE, **{POSTGRES_REQUIREMENT: "optional"})
    assert optional.returncode == pytest.ExitCode.OK, optional.stdout + optional.stderr
    # ... but never under CI
    ci = session(UNREACHABLE, **{POSTGRES_REQUIREMENT: "optional", "CI": "true"})
    assert ci.returncode == pytest.ExitCode.USAGE_ERROR, ci.stdout
