"""What the ledger service's database role may do to each table: the one list the migrations
grant from and the append-only guards are built from (ADR 0036).

The migration job connects as the role that owns the schema; the ledger connects as its own
role (``FORGE_DB_LEDGER_ROLE``, default ``forge_ledger``), which may read every table, insert
the records it writes, and change only the rows that are state. A journal entry, a signature, a
blob, a ticket, a recovery, a reconciliation or a policy revision is written once and never
changed or removed: the ledger's role holds no UPDATE or DELETE on those tables, so not even a
bug or an injected statement in the ledger can rewrite history. On SQLite (one file, no roles)
triggers refuse UPDATE and DELETE on the same tables instead.

The list is derived from every statement under services/ledger/repository;
tests/ledger/test_table_access.py scans them, so a new UPDATE or DELETE on an append-only table
fails there until someone decides, here, that the table is state. A migration that adds a table
adds its entry here and applies the grants again (repository/roles.py:grant_ledger_access).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

LEDGER_ROLE_VARIABLE = "FORGE_DB_LEDGER_ROLE"
DEFAULT_LEDGER_ROLE = "forge_ledger"
# A plain lower-case identifier: quoted or not, PostgreSQL reads it as the same name.
_ROLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True)
class TableAccess:
    """The ledger's privileges on one table beyond SELECT, which it holds on every table.

    ``lock_column``: UPDATE on that one column, only because PostgreSQL requires UPDATE
    privilege for ``SELECT ... FOR UPDATE`` / ``FOR SHARE``; a trigger refuses the UPDATE itself,
    so the table stays append-only. ``written_by_trigger``: the database's own trigger writes it
    in the ledger's transactions, with the ledger's privileges, not a repository statement."""

    insert: bool = False
    update: bool = False
    delete: bool = False
    lock_column: str = ""
    written_by_trigger: bool = False

    @property
    def append_only(self) -> bool:
        """Rows are never changed or removed once written."""
        return not (self.update or self.delete)

    def privileges(self) -> tuple[str, ...]:
        """The SQL privileges granted to the ledger's role, e.g. ``("SELECT", "INSERT")``."""
        granted = ["SELECT"]
        granted += ["INSERT"] if self.insert else []
        granted += ["UPDATE"] if self.update else []
        granted += ["DELETE"] if self.delete else []
        granted += [f"UPDATE ({self.lock_column})"] if self.lock_column else []
        return tuple(granted)


_RECORD = TableAccess(insert=True)

#: Every table of services/ledger/schema.py. No table needs DELETE: nothing the ledger stores is
#: ever removed (an expired or cancelled request changes state, its row stays).
LEDGER_ACCESS: Mapping[str, TableAccess] = {
    # listing notes (updated_at, continuity_state, current request) and completed_rounds
    "runs": TableAccess(insert=True, update=True),
    # state, lease generation, owner, expiry of the queued continuations
    "execution_requests": TableAccess(insert=True, update=True),
    # the pending count, kept by the trigger on execution_requests (ADR 0031): an upsert
    "queue_depth": TableAccess(insert=True, update=True, written_by_trigger=True),
    # the pending cap's one counter row: the trigger adds to it, an admission's conditional
    # statement locks it when there is room (ADR 0049)
    "pending_slots": TableAccess(update=True),
    "journal_entries": _RECORD,
    "signed_heads": _RECORD,
    "blobs": _RECORD,
    "admission_tickets": _RECORD,
    "recovery_actions": _RECORD,
    "reconciliations": _RECORD,
    # a policy write inserts a new revision; since ADR 0067 no statement of this release locks
    # a row (the policy lock is an advisory gate): the lock column stays granted for the release
    # before it, which still locks the newest row while a rolling upgrade runs both
    "policy_revisions": TableAccess(insert=True, lock_column="revision"),
    # written by migration 0012 and an operator's declaration only; the ledger reads it
    "unsigned_prefixes": TableAccess(),
}

#: Grants no statement of this release uses, kept because the release before it runs beside it
#: during a rolling upgrade and needs them; the migration of the release after this one takes
#: them back (expand/contract, ADR 0020). (table, kind) as tests/ledger/test_table_access.py
#: names a use: the previous release locks the newest policy revision (ADR 0067).
KEPT_FOR_THE_PREVIOUS_RELEASE: frozenset[tuple[str, str]] = frozenset(
    {("policy_revisions", "LOCK")}
)

#: Alembic's bookkeeping: the ledger reads the schema revision (its readiness check).
MIGRATOR_TABLES: Mapping[str, TableAccess] = {"alembic_version": TableAccess()}

#: The tables whose rows never change once written, guarded on both databases.
APPEND_ONLY = tuple(table for table, access in LEDGER_ACCESS.items() if access.append_only)


def ledger_role(env: Mapping[str, str] | None = None) -> str:
    """The ledger service's database role the migrations grant to (``FORGE_DB_LEDGER_ROLE``)."""
    env = os.environ if env is None else env
    role = env.get(LEDGER_ROLE_VARIABLE, "").strip() or DEFAULT_LEDGER_ROLE
    if not _ROLE_NAME.fullmatch(role):
        raise ValueError(
            f"{LEDGER_ROLE_VARIABLE} must be a lower-case SQL identifier "
            f"([a-z_][a-z0-9_]*, at most 63 characters), not {role!r}"
        )
    return role
