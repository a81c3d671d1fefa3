"""Rolling upgrades: the ledger serves a declared range of schema revisions, never migrates by
itself, and reports NOT_SERVING (instead of exiting) while the schema is outside the range or the
database does not answer (docs/adr/0020-rolling-upgrades-and-schema-ranges.md).

Several ledger replicas start at once in a deployment: if each migrated on start-up they would
race. So only ``python -m services.ledger.migrate`` (the migration job, ``make db-upgrade``)
upgrades, and a ledger started first simply waits, alive, until the schema is one it serves.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from sqlalchemy import text

from services.ledger.database import current_revision, make_engine, migrate, required_revision
from services.ledger.schema_revisions import SERVED, DatabaseCheck, SchemaRange, schema_problem
from shared.runtime.errors import FailedPrecondition
from shared.runtime.readiness import LIVENESS, NOT_SERVING, SERVING
from tests.conftest import postgres_schema
from tests.polyglot.process import LedgerProcess, health_status, running_ledger

ROOT = Path(__file__).resolve().parents[2]
# Readiness is re-checked every second; a change shows within a few.
CHANGE_SECONDS = 20.0


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


def _eventually(condition: Callable[[], bool], what: str, ledger: LedgerProcess) -> None:
    deadline = time.monotonic() + CHANGE_SECONDS
    while not condition():
        if ledger.process.poll() is not None:
            pytest.fail(f"the ledger exited ({ledger.process.returncode}):\n{ledger.log()}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {CHANGE_SECONDS:.0f}s:\n{ledger.log()}")
        time.sleep(0.1)


def _status_is(ledger: LedgerProcess, status: int) -> Callable[[], bool]:
    return lambda: health_status(ledger.target) == status


def _set_revision(url: str, revision: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
    finally:
        engine.dispose()


def test_the_declared_range_holds_this_release_head_and_the_next_expand_migration() -> None:
    head = int(required_revision())
    assert int(SERVED.oldest) <= head <= int(SERVED.newest) <= head + 1
    assert SERVED.serves(required_revision())
    window = SchemaRange("0007", "0008")
    assert [window.serves(r) for r in ("0006", "0007", "0008", "0009", None, "abc")] == [
        False,
        True,
        True,
        False,
        False,
        False,
    ]
    with pytest.raises(ValueError):
        SchemaRange("0008", "0007")


def test_an_unmigrated_schema_is_named_with_the_range_it_is_outside_of(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path}/empty.db")
    try:
        problem = schema_problem(engine)
    finally:
        engine.dispose()
    assert problem is not None
    assert "none (never migrated)" in problem
    assert f"revisions {SERVED.oldest}..{SERVED.newest}" in problem


def test_the_ledger_waits_alive_on_an_unmigrated_database_and_serves_after_the_migration(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/continuity.db"
    with running_ledger(url, tmp_path, serving=False) as ledger:
        assert health_status(ledger.target) == NOT_SERVING
        assert health_status(ledger.target, LIVENESS) == SERVING
        _eventually(lambda: "never migrated" in ledger.log(), "the log naming the schema", ledger)
        assert f"this release serves revisions {SERVED}" in ledger.log()
        # Waiting wrote no schema: the ledger never migrates by itself.
        engine = make_engine(url)
        try:
            assert current_revision(engine) is None
        finally:
            engine.dispose()

        migrated = _python_m("services.ledger.migrate", "--database-url", url, cwd=tmp_path)
        assert migrated.returncode == 0, migrated.stdout + migrated.stderr
        _eventually(_status_is(ledger, SERVING), "SERVING after the migration", ledger)


def test_a_newer_revision_inside_the_range_is_served_and_one_outside_is_not(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/continuity.db"
    migrate(url)
    # The next release's expand-only migration has run (its revision is unknown to this code).
    _set_revision(url, SERVED.newest)
    with running_ledger(url, tmp_path) as ledger:
        assert health_status(ledger.target) == SERVING
        beyond = f"{int(SERVED.newest) + 1:04d}"
        _set_revision(url, beyond)
        _eventually(_status_is(ledger, NOT_SERVING), "NOT_SERVING beyond the range", ledger)
        _eventually(
            lambda: f"at revision {beyond}, this release serves revisions {SERVED}" in ledger.log(),
            "the log line naming both revisions",
            ledger,
        )
        assert health_status(ledger.target, LIVENESS) == SERVING
        _set_revision(url, required_revision())
        _eventually(_status_is(ledger, SERVING), "SERVING back inside the range", ledger)


class _Relay:
    """A TCP relay on loopback in front of PostgreSQL that the test can cut and restore, so the
    ledger loses its (real) database and finds it again on the same address."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = 0
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def open(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Refuse new connections and drop every open one."""
        with self._lock:
            if self._listener is not None:
                # shutdown wakes the accept blocked on it; close alone would leave it listening.
                with suppress(OSError):
                    self._listener.shutdown(socket.SHUT_RDWR)
                self._listener.close()
                self._listener = None
            for sock in self._sockets:
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            with self._lock:
                self._sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with suppress(OSError):
            sink.shutdown(socket.SHUT_RDWR)


@contextmanager
def _relayed(url: str) -> Iterator[tuple[_Relay, str]]:
    parts = urlsplit(url)
    relay = _Relay((parts.hostname or "127.0.0.1", parts.port or 5432))
    relay.open()
    netloc = (
        f"{parts.username}@127.0.0.1:{relay.port}" if parts.username else f"127.0.0.1:{relay.port}"
    )
    try:
        yield relay, urlunsplit(parts._replace(netloc=netloc))
    finally:
        relay.cut()


def test_health_follows_a_lost_database_and_its_return(tmp_path: Path) -> None:
    with postgres_schema() as url, _relayed(url) as (relay, relayed_url):
        relay.cut()  # no database yet: the ledger starts anyway, NOT_SERVING
        with running_ledger(relayed_url, tmp_path, serving=False) as ledger:
            assert health_status(ledger.target) == NOT_SERVING
            _eventually(lambda: "starting NOT_SERVING" in ledger.log(), "the log", ledger)
            relay.open()
            _eventually(_status_is(ledger, SERVING), "SERVING once the database answers", ledger)
            relay.cut()
            _eventually(_status_is(ledger, NOT_SERVING), "NOT_SERVING without it", ledger)
            assert "waiting for the database (unreachable" in ledger.log()
            assert health_status(ledger.target, LIVENESS) == SERVING
            relay.open()
            _eventually(_status_is(ledger, SERVING), "SERVING with the database back", ledger)


def test_a_server_that_will_not_run_read_committed_never_serves() -> None:
    """At start-up it stops the process (exit status 4); found later, once the database answers,
    the ledger stays NOT_SERVING and says why."""
    with postgres_schema() as url:
        engine = make_engine(url, isolation_level="SERIALIZABLE")
        try:
            check = DatabaseCheck(engine)
            with pytest.raises(FailedPrecondition):
                check.at_start_up()
            problem = check()
        finally:
            engine.dispose()
    assert problem is not None and "READ COMMITTED" in problem
