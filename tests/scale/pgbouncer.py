"""A real PgBouncer in transaction mode in front of the test PostgreSQL, started by the test on
a free loopback port with its own generated ini and user list (never the package's service).

PgBouncer comes from the distribution's packages (``make test``, ``make scale`` and ``.ci/run``
install it); FORGE_PGBOUNCER names another executable. Without it the tests skip on a developer
machine and fail under CI=true, as the console's Chromium tests do.

Behind PgBouncer the libpq ``options`` startup parameter (how the other tests select their
schema) does not pass, so the bouncer's database ``forge`` sets the schema's search path on
every server connection it opens (``connect_query``); the ledgers connect to ``forge`` and the
SQL samples keep reading the schema directly. The bouncer logs in to the server as the user of
the schema's URL: the ledger's own role (ADR 0036), as the ledgers do when connected directly.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.conftest import POSTGRES_URL
from tests.polyglot.process import _free_port

#: Debian's package installs it outside a non-root user's PATH.
DEBIAN_PATH = "/usr/sbin/pgbouncer"
DATABASE = "forge"
STARTUP_SECONDS = 30.0
#: Server connections per (database, user): fewer than the two replicas' pools together, so
#: client transactions really do share server sessions.
SERVER_POOL = 10


def pgbouncer_path() -> str:
    found = os.environ.get("FORGE_PGBOUNCER") or shutil.which("pgbouncer") or ""
    if not found and os.access(DEBIAN_PATH, os.X_OK):
        found = DEBIAN_PATH
    if found:
        return found
    message = "pgbouncer is not installed (apt-get install pgbouncer; make test installs it)"
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(message)
    pytest.skip(message)


def schema_of(database_url: str) -> str:
    """The schema a ``postgres_schema`` URL selects (its ``-csearch_path=`` option)."""
    options = parse_qs(urlsplit(database_url).query)["options"][0]
    for option in options.split():
        name, _, value = option.removeprefix("-c").partition("=")
        if name == "search_path":
            return value
    raise AssertionError(f"no search_path in {database_url}")


@dataclass(frozen=True)
class Bouncer:
    """A running PgBouncer: the URL the ledgers use, and its admin console."""

    url: str
    port: int
    user: str

    def show(self, what: str) -> list[dict[str, object]]:
        """``SHOW <what>`` on the admin console (simple query protocol only)."""
        with psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            dbname="pgbouncer",
            user=self.user,
            autocommit=True,
            cursor_factory=psycopg.ClientCursor,
        ) as connection:
            cursor = connection.execute(f"SHOW {what}")
            names = [column.name for column in cursor.description or []]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def transactions(self) -> int:
        """Transactions PgBouncer carried for the ledgers' database."""
        return sum(
            int(row["total_xact_count"])  # type: ignore[call-overload]
            for row in self.show("STATS")
            if row["database"] == DATABASE
        )


def _ini(database_url: str, port: int, userlist: Path) -> str:
    server = make_url(database_url)
    user = make_url(POSTGRES_URL).username or "postgres"
    return f"""[databases]
{DATABASE} = host={server.host or "127.0.0.1"} port={server.port or 5432} \
dbname={server.database} user={server.username} \
connect_query='SET search_path TO {schema_of(database_url)}'

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {userlist}
admin_users = {user}
pool_mode = transaction
default_pool_size = {SERVER_POOL}
max_client_conn = 500
server_reset_query =
logfile =
pidfile =
"""


def _accepting(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class BouncerProcess:
    """PgBouncer (transaction pooling) in front of the schema of ``database_url`` (a
    ``postgres_schema`` URL), as its user, on one port across restarts."""

    def __init__(self, database_url: str, workdir: Path) -> None:
        self.executable = pgbouncer_path()
        workdir.mkdir(parents=True, exist_ok=True)
        user = make_url(POSTGRES_URL).username or "postgres"
        server_user = make_url(database_url).username or user
        userlist = workdir / "userlist.txt"
        userlist.write_text(
            "".join(f'"{name}" ""\n' for name in dict.fromkeys([user, server_user])),
            encoding="utf-8",
        )
        port = _free_port()
        self.ini = workdir / "pgbouncer.ini"
        self.ini.write_text(_ini(database_url, port, userlist), encoding="utf-8")
        self.log_path = workdir / "pgbouncer.log"
        url = f"postgresql+psycopg://{user}@127.0.0.1:{port}/{DATABASE}"
        self.bouncer = Bouncer(url, port, user)
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        # PgBouncer refuses to run as root; it reads its ini before it drops to the user named.
        command = [self.executable, *(["-u", "nobody"] if os.geteuid() == 0 else []), str(self.ini)]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        self.starts += 1
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _accepting(self.bouncer.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"pgbouncer did not start:\n{self.log_path.read_text()}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: every client and server connection it carried is cut at once."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=15)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextmanager
def running_pgbouncer(database_url: str, workdir: Path) -> Iterator[Bouncer]:
    """PgBouncer (transaction pooling) in front of the schema of ``database_url`` (a
    ``postgres_schema`` URL), as its user; stopped with SIGTERM after."""
    process = BouncerProcess(database_url, workdir)
    try:
        process.start()
        yield process.bouncer
    finally:
        process.stop()
