"""The schema revisions this release of the ledger serves, and the readiness check built on them
(docs/adr/0020-rolling-upgrades-and-schema-ranges.md).

During a rolling upgrade two releases run side by side on one database, before and after the
migration Job: so a release serves a declared range of revisions, not only its own head. The
ledger never exits over the schema: until the database answers with a revision in the range its
health is NOT_SERVING (shared.runtime.readiness), and it serves as soon as the range is met.

Migrations follow expand/contract: the migration after this release's head only adds (tables,
nullable or defaulted columns, indexes), so this release can serve it; a migration removes only
what the release before it no longer uses.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from services.ledger.database import (
    INSUFFICIENT_PRIVILEGE,
    read_transaction,
    require_write_isolation,
    sqlstate,
)
from services.ledger.repository import schema_version
from shared.runtime.errors import DomainError, FailedPrecondition

log = logging.getLogger("forge.ledger")


@dataclass(frozen=True)
class SchemaRange:
    """The revisions a release serves, both ends included. Revisions are zero-padded sequence
    numbers (0001, 0002, ...), one migration each, so a revision the code has no migration for
    (the next release's) still has its place in the order."""

    oldest: str
    newest: str

    def __post_init__(self) -> None:
        if not (self.oldest.isdigit() and self.newest.isdigit()) or int(self.oldest) > int(
            self.newest
        ):
            raise ValueError(f"not a range of revisions: {self.oldest}..{self.newest}")

    def serves(self, revision: str | None) -> bool:
        return (
            revision is not None
            and revision.isdigit()
            and int(self.oldest) <= int(revision) <= int(self.newest)
        )

    def __str__(self) -> str:
        return f"{self.oldest}..{self.newest}"


#: This release's range. ``oldest``: the first revision whose schema holds everything this code
#: reads and writes (raise it when the code starts to use what a migration adds). ``newest``: the
#: next release's expand-only migration, head + 1; raise it with every new migration. 0010: the
#: pending count the database keeps, which the queue caps read (ADR 0031); 0011 (LZ4 for stored
#: bytes) changes nothing the code reads or writes; 0012: chained signed heads and declared
#: pre-signing prefixes, which every signing append reads and writes (ADR 0015); 0013 (the
#: ledger's own role and the append-only guards, ADR 0036) changes no statement the code runs,
#: so ``oldest`` stays 0012: a ledger run as the new role before 0013 granted it anything sees
#: permission denied and waits, NOT_SERVING. 0014: the pending cap's counter row, which every
#: admission's conditional statement updates (ADR 0049), so ``oldest`` was 0014. 0015 changes no
#: table; from it every serving release takes the policy lock as the schema's advisory gate, and
#: this release locks no policy row, which is only safe beside such releases (ADR 0067), so
#: ``oldest`` is 0015.
SERVED = SchemaRange(oldest="0015", newest="0016")


def _database_problem(error: BaseException) -> str:
    if sqlstate(error) == INSUFFICIENT_PRIVILEGE:
        # The database answers but refuses this role: the ledger connects as its own role
        # before migration 0013 granted it the schema (ADR 0036). It serves once granted.
        return (
            "access to the schema for this database role (permission denied: the migrations "
            "grant the ledger's role its tables from revision 0013; run them, or connect as "
            "the role they granted)"
        )
    return f"the database (unreachable: {type(error).__name__})"


def database_revision(engine: Engine) -> str | None:
    """The revision the schema is at (None: never migrated), read as alembic records it but
    without alembic's per-call logging: the readiness check asks every second."""
    with read_transaction(engine) as connection:
        return schema_version.revision(connection)


def schema_problem(engine: Engine, served: SchemaRange = SERVED) -> str | None:
    """None while the database answers and its schema is at a revision ``served`` includes;
    otherwise what the ledger waits for (its readiness check, logged on each change)."""
    try:
        revision = database_revision(engine)
    except (SQLAlchemyError, OSError, DomainError) as error:
        # Unreachable, refusing connections or failing mid-query: not ready, and say why.
        return _database_problem(error)
    if served.serves(revision):
        return None
    return (
        f"a schema this release serves: the database is at revision "
        f"{revision or 'none (never migrated)'}, this release serves revisions {served} "
        f"(run `python -m services.ledger.migrate`, or roll out a release that serves it)"
    )


class DatabaseCheck:
    """The ledger's readiness check: the database answers, writes run at READ COMMITTED (ADR
    0016; checked once), and the schema is at a revision ``served`` includes.

    :meth:`at_start_up` checks the isolation level at once when the database answers, so a
    misconfigured server still stops the process (exit status 4); when it does not answer, the
    process starts anyway, NOT_SERVING, and the level is checked once the database answers."""

    def __init__(self, engine: Engine, served: SchemaRange = SERVED) -> None:
        self._engine = engine
        self._served = served
        self._isolation_checked = False

    def at_start_up(self) -> None:
        """FailedPrecondition (DATABASE_ISOLATION_UNSUPPORTED) on a misconfigured server; a
        database that does not answer is left to the readiness loop."""
        try:
            require_write_isolation(self._engine)
        except FailedPrecondition:
            raise
        except (SQLAlchemyError, OSError, DomainError) as error:
            log.warning("starting NOT_SERVING: %s", _database_problem(error))
            return
        self._isolation_checked = True

    def __call__(self) -> str | None:
        if not self._isolation_checked:
            try:
                require_write_isolation(self._engine)
            except FailedPrecondition as refused:
                return f"a database that runs writes at READ COMMITTED: {refused.message}"
            except (SQLAlchemyError, OSError, DomainError) as error:
                return _database_problem(error)
            self._isolation_checked = True
        return schema_problem(self._engine, self._served)
