"""Issue 46 §5, backup and restore as the README's "Operating" section documents it: `pg_dump`
of the ledger's schema, `pg_restore` into a fresh database, a ledger served on the restored copy,
and every run's bundle exported from it verified offline with the pinned key. A restore older than
a head a monitor witnessed is reported as a rollback by the verifier (`--known-heads`).
PostgreSQL only: the procedure is PostgreSQL's."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from forge.continuity.v1 import common_pb2, ledger_pb2, ledger_pb2_grpc
from forge_audit.verify import load_trusted_keys, verify_file
from services.client import ContinuityClient
from services.client.cli import main as cli_main
from services.ledger.database import make_engine
from services.ledger.domain.signing import HeadSigner
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from tests.audit.conftest import RealRun, export, live_run
from tests.audit.test_witnesses import verify_program
from tests.support import POSTGRES_URL, Served, serve, token_roles

POSTGRESQL_ONLY = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


def _libpq(url: str, database: str | None = None) -> str:
    """A SQLAlchemy URL as libpq's, optionally on another database."""
    parsed = make_url(url).set(drivername="postgresql")
    if database is not None:
        parsed = parsed.set(database=database)
    return parsed.render_as_string(hide_password=False)


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new, empty database on the same server; dropped afterwards."""
    name = f"restore_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield name
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _schema_of(engine: Engine) -> str:
    with engine.connect() as connection:
        return str(connection.execute(text("SELECT current_schema()")).scalar_one())


def backup(engine: Engine, path: Path) -> Path:
    """The documented backup: `pg_dump --format=custom --schema=<schema>`."""
    schema = _schema_of(engine)
    subprocess.run(
        [
            "pg_dump",
            "--format=custom",
            f"--schema={schema}",
            f"--file={path}",
            _libpq(POSTGRES_URL),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return path


def restore(dump: Path, database: str) -> None:
    """The documented restore: `pg_restore --exit-on-error --dbname=<fresh database>`."""
    subprocess.run(
        ["pg_restore", "--exit-on-error", f"--dbname={_libpq(POSTGRES_URL, database)}", str(dump)],
        check=True,
        capture_output=True,
        timeout=120,
    )


@contextmanager
def ledger_on(engine: Engine, database: str, signer: HeadSigner) -> Iterator[Served]:
    """A ledger served on ``database``: the original ledger's URL (role, schema) on it."""
    url = make_url(engine.url.render_as_string(hide_password=False)).set(database=database)
    restored = make_engine(url.render_as_string(hide_password=False))
    try:
        with serve("ledger", bindings(Ledger(restored, authority=token_roles, signer=signer))) as s:
            yield s
    finally:
        restored.dispose()


def _export(target: str, run_id: str, path: Path) -> Path:
    with ContinuityClient(
        "reader-token", ledger_target=target, candidate_target=target, admission_target=target
    ) as reader:
        reader.export_journal(run_id, path)
    return path


def _records(bundle: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in bundle.read_text().splitlines()]


@POSTGRESQL_ONLY
def test_a_restored_backup_serves_and_every_runs_bundle_verifies_offline(
    real_run: RealRun, engine: Engine, signer: HeadSigner, tmp_path: Path
) -> None:
    live_run(real_run.stack, "run-2")
    runs = ["run-1", "run-2"]
    keys = tmp_path / "keys.json"
    assert _cli(real_run.stack.ledger.target, "signing-keys", "export", "--out", str(keys)) == 0
    before = {
        run_id: export(real_run.stack, run_id, tmp_path / f"{run_id}.jsonl") for run_id in runs
    }
    dump = backup(engine, tmp_path / "forge.dump")
    with fresh_database() as database:
        restore(dump, database)
        with ledger_on(engine, database, signer) as restored:
            trusted = load_trusted_keys(keys)
            for run_id in runs:
                bundle = _export(restored.target, run_id, tmp_path / f"restored-{run_id}.jsonl")
                report = verify_file(bundle, trusted)
                assert report.entries > 0 and report.admissions == 1, run_id
                # the same records as before the backup (the export time aside)
                assert _records(bundle)[1:-1] == _records(before[run_id])[1:-1], run_id
            # the restored ledger takes writes and keeps signing the chain it continues
            writer = ledger_pb2_grpc.LedgerServiceStub(restored.channel("writer-token"))
            head = writer.GetRun(ledger_pb2.GetRunRequest(run_id="run-1")).head.hash
            writer.AppendJournalEntry(
                ledger_pb2.AppendJournalEntryRequest(
                    run_id="run-1",
                    expected_head_hash=head,
                    kind=common_pb2.JOURNAL_ENTRY_KIND_TOOL_INTENT,
                    payload_json=json.dumps({"call_id": "after-the-restore"}),
                )
            )
            grown = _export(restored.target, "run-1", tmp_path / "grown.jsonl")
            assert (
                verify_file(grown, trusted).entries
                == verify_file(before["run-1"], trusted).entries + 1
            )


@POSTGRESQL_ONLY
def test_a_restore_older_than_a_witnessed_head_is_reported_as_a_rollback(
    real_run: RealRun, engine: Engine, signer: HeadSigner, tmp_path: Path
) -> None:
    keys, heads = tmp_path / "keys.json", tmp_path / "heads.jsonl"
    target = real_run.stack.ledger.target
    assert _cli(target, "signing-keys", "export", "--out", str(keys)) == 0
    dump = backup(engine, tmp_path / "forge.dump")
    # After the backup the run grows, and a monitor witnesses the new head.
    writer = real_run.stack.ledger_stub()
    head = writer.GetRun(ledger_pb2.GetRunRequest(run_id="run-1")).head.hash
    writer.AppendJournalEntry(
        ledger_pb2.AppendJournalEntryRequest(
            run_id="run-1",
            expected_head_hash=head,
            kind=common_pb2.JOURNAL_ENTRY_KIND_TOOL_INTENT,
            payload_json=json.dumps({"call_id": "after-the-backup"}),
        )
    )
    assert _cli(target, "heads", "watch", "--once", "--out", str(heads)) == 0
    with fresh_database() as database:
        restore(dump, database)
        with ledger_on(engine, database, signer) as restored:
            bundle = _export(restored.target, "run-1", tmp_path / "restored.jsonl")
    trusted = load_trusted_keys(keys)
    assert verify_file(bundle, trusted).entries > 0  # valid alone: every head genuinely signed
    done = verify_program(
        "--json", "--trusted-key", str(keys), "--known-heads", str(heads), str(bundle)
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert json.loads(done.stdout)["problem"] == "rollback"


def _cli(target: str, *arguments: str) -> int:
    return cli_main(["--token", "reader-token", "--ledger", target, *arguments], env={})
