"""Test helpers: principals for every role, real servers on ephemeral loopback ports, channels,
and the database as its owner sees it."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Connection, Engine, func, select, text
from sqlalchemy.engine import make_url

from forge.continuity.v1 import (
    candidate_pb2_grpc,
    common_pb2,
    ledger_pb2,
    ledger_pb2_grpc,
)
from services.admission.downstream import Downstream
from services.ledger.database import make_engine
from services.ledger.repository.roles import create_append_only_guards, drop_append_only_guards
from services.ledger.schema import metadata, runs
from services.ledger.table_access import ledger_role
from shared.continuity.qualification import (
    DEFAULT_QUALIFIED_PROFILE,
    REGISTRY_FORMAT,
    ProfileDigest,
    installed_profile,
    registration,
)
from shared.contract.channels import open_channel
from shared.runtime.auth import PrincipalDirectory, token_digest
from shared.runtime.config import Settings
from shared.runtime.server import RunningServer, ServiceBinding, start_server

# token -> (identity, roles)
TOKENS: dict[str, tuple[str, list[str]]] = {
    "admin-token": ("alice-admin", ["factory_administrator"]),
    "operator-token": ("olga-operator", ["execution_operator"]),
    "operator2-token": ("otto-operator", ["execution_operator"]),
    "worker-token": ("wanda-worker", ["worker"]),
    "worker2-token": ("walt-worker", ["worker"]),
    "writer-token": ("paul-writer", ["platform_writer"]),
    "reader-token": ("rita-reader", ["reader"]),
    # Each calling service has its own identity: admission (commits) and the candidate (reads).
    "service-token": ("admission", ["admission_service"]),
    "candidate-service-token": ("candidate", ["candidate_service"]),
    # An execution operator who is also a factory administrator: the original operator of a
    # ticket who may recover it.
    "admin-operator-token": ("ada-admin-operator", ["execution_operator", "factory_administrator"]),
}
# Sixty-four distinct execution operators for the concurrency tests.
TOKENS.update({f"op-{i}-token": (f"operator-{i:02d}", ["execution_operator"]) for i in range(64)})


def token_roles(identity: str) -> frozenset[str]:
    """The ledger's authority source in tests: the current roles of the test principals."""
    return frozenset(
        role for known, roles in TOKENS.values() if known == identity for role in roles
    )


ROLE_TOKENS = {
    "factory_administrator": "admin-token",
    "execution_operator": "operator-token",
    "worker": "worker-token",
    "platform_writer": "writer-token",
    "reader": "reader-token",
    "admission_service": "service-token",
    "candidate_service": "candidate-service-token",
}


def principals_document() -> dict[str, object]:
    return {
        "principals": [
            {"identity": identity, "roles": roles, "token_sha256": token_digest(token)}
            for token, (identity, roles) in TOKENS.items()
        ]
    }


def directory() -> PrincipalDirectory:
    return PrincipalDirectory.from_document(principals_document())


@dataclass
class Served:
    """A running server and how to reach it."""

    running: RunningServer
    target: str

    def channel(self, token: str = "") -> grpc.Channel:
        return open_channel(self.target, token)


@contextmanager
def serve(service: str, bindings: Sequence[ServiceBinding], **settings: object) -> Iterator[Served]:
    """Start a real server on 127.0.0.1:<ephemeral> hosting ``bindings``; stop it afterwards."""
    running = start_server(
        Settings(service=service, host="127.0.0.1", port=0, **settings),  # type: ignore[arg-type]
        bindings,
        directory(),
    )
    try:
        yield Served(running, f"127.0.0.1:{running.port}")
    finally:
        running.stop(grace=1.0)


def admission_downstream(ledger_target: str, candidate_target: str) -> Downstream:
    """The stubs an admission server calls, each with the continuity service identity."""
    return Downstream(
        ledger=ledger_pb2_grpc.LedgerServiceStub(open_channel(ledger_target, "service-token")),
        candidate=candidate_pb2_grpc.CandidateServiceStub(
            open_channel(candidate_target, "service-token")
        ),
    )


def run_row(engine: Engine, run_id: str = "run-1") -> dict[str, object]:
    """The run's row, every column: equal before and after a refusal means it was not touched."""
    with engine.connect() as connection:
        return dict(
            connection.execute(select(runs).where(runs.c.run_id == run_id)).mappings().one()
        )


def row_counts(engine: Engine) -> dict[str, int]:
    """Rows per ledger table: equal before and after a refusal means nothing was written."""
    with engine.connect() as connection:
        return {
            table.name: int(
                connection.execute(select(func.count()).select_from(table)).scalar_one()
            )
            for table in metadata.sorted_tables
        }


def cache_counts(port: int, prefix: str) -> dict[tuple[str, str], float]:
    """The samples of the ``prefix`` cache families a /metrics endpoint on ``port`` serves now,
    by (sample name, ``cache`` label)."""
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    return {
        (sample.name, sample.labels.get("cache", "")): sample.value
        for family in text_string_to_metric_families(text)
        if family.name.startswith(prefix)
        for sample in family.samples
    }


def registry_of_other_migration_code(directory: Path, migration_code: str) -> Path:
    """A qualified-profiles file (to name in FORGE_QUALIFIED_PROFILES_FILE) registering the
    default profile with ``migration_code`` instead of the installed one's: the installed
    profile is then not qualified."""
    registered = ProfileDigest(**{**installed_profile().parts(), "migration_code": migration_code})
    registry = directory / "profiles.json"
    registry.write_text(
        json.dumps(
            {
                "format": REGISTRY_FORMAT,
                "profiles": [registration(DEFAULT_QUALIFIED_PROFILE, registered)],
            }
        ),
        encoding="utf-8",
    )
    return registry


# --- the database's two roles (ADR 0036) ------------------------------------------------------

#: The test server as its administrator, who owns every test schema and runs the migrations. The
#: server trusts local connections (.ci/run), so the ledger's role logs in without a password.
POSTGRES_URL = os.environ.get(
    "FORGE_TEST_POSTGRES_URL",
    "postgresql+psycopg://postgres@127.0.0.1:5432/forge_continuity_test",
)
#: A test database's name ends in this: the suite creates and drops schemas in it as the server's
#: administrator, so it refuses any database not named as a dedicated test one.
DEDICATED_SUFFIX = "_test"
#: Set to ``optional`` on a machine without PostgreSQL: its variants are then skipped, saying so.
POSTGRES_REQUIREMENT = "FORGE_TEST_POSTGRES"


def dedicated_database_problem(url: str) -> str | None:
    """Why the suite must not run against ``url``'s database (None: a dedicated test one)."""
    name = make_url(url).database or ""
    if name.endswith(DEDICATED_SUFFIX) and name != DEDICATED_SUFFIX:
        return None
    return (
        f"the test database {name!r} is not a dedicated one: its name must end in "
        f"{DEDICATED_SUFFIX!r} (default forge_continuity_test; FORGE_TEST_POSTGRES_URL names "
        "another), since the suite creates and drops schemas in it"
    )


def ensure_test_database(url: str = POSTGRES_URL) -> str:
    """Create ``url``'s dedicated test database when the server has none of that name; what was
    done. Raises when the name is not a dedicated one or the server cannot be reached."""
    problem = dedicated_database_problem(url)
    if problem:
        raise ValueError(problem)
    target = make_url(url)
    maintenance = make_engine(target.set(database="postgres").render_as_string(False))
    try:
        # CREATE DATABASE runs outside a transaction; the name was checked above
        with maintenance.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            found = connection.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :name"),
                {"name": target.database},
            ).scalar()
            if found:
                return f"test database {target.database} is there"
            connection.execute(text(f'CREATE DATABASE "{target.database}"'))
            return f"created test database {target.database}"
    finally:
        maintenance.dispose()


#: The role every ledger the tests start on PostgreSQL connects as.
LEDGER_ROLE = ledger_role()


def _as_user(url: str, username: str | None, password: str | None) -> str:
    if make_url(url).get_backend_name() != "postgresql":
        return url  # SQLite: one file, no roles
    changed = make_url(url).set(username=username, password=password)
    return changed.render_as_string(hide_password=False)


def ledger_url(url: str) -> str:
    """``url`` (a PostgreSQL schema's) connected as the ledger's role instead."""
    return _as_user(url, LEDGER_ROLE, None)


def owner_url(url: str) -> str:
    """``url`` (a PostgreSQL schema's) connected as the schema's owner, who migrates it."""
    owner = make_url(POSTGRES_URL)
    return _as_user(url, owner.username, owner.password)


@contextmanager
def owner_engine(database: Engine | str) -> Iterator[Engine]:
    """An engine on ``database`` (an engine or URL the ledger uses) as the schema's owner, who
    migrates it; disposed afterwards."""
    url = database if isinstance(database, str) else database.url.render_as_string(False)
    owner = make_engine(owner_url(url))
    try:
        yield owner
    finally:
        owner.dispose()


@contextmanager
def as_database_owner(database: Engine | str) -> Iterator[Connection]:
    """One transaction on ``database`` (an engine or URL the ledger uses) with the access an
    attacker holding the schema owner's credentials (PostgreSQL) or the database file (SQLite)
    has, which the ledger's role lacks: what a test that tampers with stored rows writes through.
    The append-only guards are dropped inside the transaction and restored before it commits,
    so the ledger still meets them afterwards. Commits when the block ends without an error::

        with as_database_owner(engine) as connection:
            connection.execute(text("UPDATE journal_entries SET actor = 'mallory'"))
    """
    with owner_engine(database) as owner, owner.begin() as connection:
        drop_append_only_guards(connection)
        yield connection
        create_append_only_guards(connection)


def whole_journal(
    stub: ledger_pb2_grpc.LedgerServiceStub, run_id: str, timeout: float | None = None
) -> list[common_pb2.JournalEntry]:
    """Every entry of a run's journal, page by page. A page holds at most 1000 entries (fewer
    past about 1 MiB of payloads), so a check that reads one page calls the rest lost."""
    entries: list[common_pb2.JournalEntry] = []
    sequence = 1
    while sequence:
        request = ledger_pb2.ReadJournalRequest(
            run_id=run_id, from_sequence=sequence, page_size=1000
        )
        page = stub.ReadJournal(request, timeout=timeout)
        entries.extend(page.entries)
        sequence = page.next_sequence
    return entries


if __name__ == "__main__":  # `make test-database`: the dedicated test database, created if missing
    import sys

    try:
        print(ensure_test_database())
    except Exception as error:  # noqa: BLE001 - any failure stops make with its reason
        sys.exit(f"PostgreSQL test database unusable at {POSTGRES_URL}: {error}")
