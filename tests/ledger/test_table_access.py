"""The ledger role's privileges (services/ledger/table_access.py) are exactly what the ledger's
statements need (ADR 0036): every INSERT, UPDATE, DELETE and row lock under services/ledger is
found by reading the code, and each must be granted, each grant used. A new UPDATE or DELETE on
an append-only table (the journal, signatures, blobs, tickets, ...) fails here, before the
database's refusal would fail it in production."""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Select
from sqlalchemy.sql.util import find_tables

from services.ledger.schema import metadata
from services.ledger.table_access import (
    APPEND_ONLY,
    KEPT_FOR_THE_PREVIOUS_RELEASE,
    LEDGER_ACCESS,
    MIGRATOR_TABLES,
    TableAccess,
    ledger_role,
)

ROOT = Path(__file__).resolve().parents[2]
LEDGER = ROOT / "services" / "ledger"
#: Statements run with the migration's credentials, not the ledger's role (like migrations).
OWNER_MODULES = frozenset({"services/ledger/repository/declarations.py"})
#: Where a statement's table is not written out: the scan cannot tell, so it refuses.
UNKNOWN = "?"
_CRUD = {"insert": "INSERT", "update": "UPDATE", "delete": "DELETE"}
_SQL_MODULES = {"sa", "sqlalchemy", "postgresql", "sqlite"}
_TEXT_USES = (
    (re.compile(r"\bINSERT\s+INTO\s+(\w+)", re.I), "INSERT"),
    (re.compile(r"\bUPDATE\s+(?:ONLY\s+)?(\w+)\s+SET\b", re.I), "UPDATE"),
    (re.compile(r"\bDELETE\s+FROM\s+(?:ONLY\s+)?(\w+)", re.I), "DELETE"),
    (re.compile(r"\bTRUNCATE\s+(?:TABLE\s+)?(\w+)", re.I), "DELETE"),
    (re.compile(r"\bINSERT\s+INTO\s+(\w+)[^;]*\bDO\s+UPDATE\b", re.I | re.S), "UPDATE"),
    (re.compile(r"\bFOR\s+(?:NO\s+KEY\s+)?(?:UPDATE|SHARE|KEY\s+SHARE)\b()", re.I), "LOCK"),
)


@dataclass(frozen=True, order=True)
class Use:
    """One statement's use of a table: INSERT, UPDATE, DELETE or LOCK (FOR UPDATE / SHARE)."""

    table: str
    kind: str
    where: str


def _schema_names(tree: ast.Module) -> dict[str, str]:
    """Local name -> table name, for the tables a module imports from services.ledger.schema."""
    tables = {table.name for table in metadata.sorted_tables}
    return {
        alias.asname or alias.name: alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "services.ledger.schema"
        for alias in node.names
        if alias.name in tables
    }


def _docstrings(tree: ast.Module) -> set[int]:
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def _locked_by(module: str, receiver: ast.expr) -> list[str]:
    """The tables ``receiver.with_for_update()`` (no ``of=``) locks: those its FROM names."""
    if not isinstance(receiver, ast.Name):
        return [UNKNOWN]
    statement = getattr(importlib.import_module(module), receiver.id, None)
    if not isinstance(statement, Select):
        return [UNKNOWN]
    return sorted(
        table.name for source in statement.get_final_froms() for table in find_tables(source)
    )


class _Scan:
    """One module's statements: the tables it imports from the schema, and what it runs."""

    def __init__(self, source: str, where: str, module: str) -> None:
        self.tree = ast.parse(source)
        self.names, self.where, self.module = _schema_names(self.tree), where, module
        self.found: set[Use] = set()

    def table_of(self, node: ast.expr | None) -> str:
        return self.names.get(node.id, UNKNOWN) if isinstance(node, ast.Name) else UNKNOWN

    def add(self, table: str, kind: str, node: ast.AST) -> None:
        self.found.add(Use(table, kind, f"{self.where}:{getattr(node, 'lineno', 0)}"))

    def call(self, node: ast.Call) -> None:
        function = node.func
        name = function.id if isinstance(function, ast.Name) else ""
        if isinstance(function, ast.Attribute):
            owner = function.value
            if isinstance(owner, ast.Name) and owner.id in _SQL_MODULES:
                name = function.attr  # sa.update(...), postgresql.insert(...)
            elif function.attr in _CRUD and self.table_of(owner) != UNKNOWN:
                self.add(self.table_of(owner), _CRUD[function.attr], node)  # table.update()
            elif function.attr == "on_conflict_do_update":
                self.add(_inserted(owner, self.table_of), "UPDATE", node)
            elif function.attr == "with_for_update":
                for table in self.locked(node, owner):
                    self.add(table, "LOCK", node)
        if name in _CRUD:
            table = self.table_of(node.args[0] if node.args else None)
            if table != UNKNOWN or name != "insert":  # an unnamed table may not change
                self.add(table, _CRUD[name], node)

    def locked(self, node: ast.Call, receiver: ast.expr) -> list[str]:
        of = next((keyword.value for keyword in node.keywords if keyword.arg == "of"), None)
        if of is not None:
            items = of.elts if isinstance(of, ast.Tuple | ast.List) else [of]
            return [self.table_of(item) for item in items]
        return _locked_by(self.module, receiver) if self.module else [UNKNOWN]

    def text(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str):
            return
        for pattern, kind in _TEXT_USES:
            for match in pattern.finditer(node.value):
                self.add(match.group(1) or UNKNOWN, kind, node)

    def run(self) -> set[Use]:
        docstrings = _docstrings(self.tree)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, ast.Constant) and id(node) not in docstrings:
                self.text(node)
        return self.found


def statement_uses(source: str, where: str, module: str = "") -> set[Use]:
    """Every table use the statements in ``source`` (a module's text) make; ``module`` (its
    import name) resolves the statements a ``with_for_update()`` without ``of=`` locks."""
    return _Scan(source, where, module).run()


def _inserted(node: ast.expr, table_of: Callable[[ast.expr | None], str]) -> str:
    """The table of the ``insert(table)`` an ``.on_conflict_do_update`` is chained onto."""
    while isinstance(node, ast.Call | ast.Attribute):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if called == "insert" and node.args:
                return table_of(node.args[0])
            node = node.func.value if isinstance(node.func, ast.Attribute) else node.func
        else:
            node = node.value if isinstance(node, ast.Attribute) else node.func
    return UNKNOWN


def ledger_uses() -> set[Use]:
    """Every table use of the ledger's code (migrations aside: they run as the owner)."""
    found: set[Use] = set()
    for path in sorted(LEDGER.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if "migrations" in relative.parts or relative.as_posix() in OWNER_MODULES:
            continue
        module = ".".join(relative.with_suffix("").parts)
        found |= statement_uses(path.read_text(encoding="utf-8"), str(relative), module)
    return found


def _permits(access: TableAccess, kind: str) -> bool:
    return {
        "INSERT": access.insert,
        "UPDATE": access.update,
        "DELETE": access.delete,
        "LOCK": access.update or bool(access.lock_column),
    }[kind]


def test_every_statement_of_the_ledger_is_granted() -> None:
    refused = sorted(
        use
        for use in ledger_uses()
        if use.table not in LEDGER_ACCESS or not _permits(LEDGER_ACCESS[use.table], use.kind)
    )
    assert refused == [], (
        "statements the ledger's role may not run (services/ledger/table_access.py; a table "
        f"named '{UNKNOWN}' is one the scan cannot name: write the table out): {refused}"
    )


def test_every_grant_is_used() -> None:
    used = {(use.table, use.kind) for use in ledger_uses()}
    unused = [
        (table, kind)
        for table, access in LEDGER_ACCESS.items()
        for kind in ("INSERT", "UPDATE", "DELETE")
        if _permits(access, kind) and not access.written_by_trigger and (table, kind) not in used
    ] + [
        (table, "LOCK")
        for table, access in LEDGER_ACCESS.items()
        if access.lock_column and (table, "LOCK") not in used
    ]
    unused = [use for use in unused if use not in KEPT_FOR_THE_PREVIOUS_RELEASE]
    assert unused == [], f"privileges no statement of the ledger needs: {unused}"
    # a grant kept for the release before this one is one this release no longer uses
    assert not KEPT_FOR_THE_PREVIOUS_RELEASE & used


def test_every_table_is_listed_and_the_record_tables_are_append_only() -> None:
    assert set(LEDGER_ACCESS) == {table.name for table in metadata.sorted_tables}
    assert set(MIGRATOR_TABLES) == {"alembic_version"}
    assert not any(access.delete for access in LEDGER_ACCESS.values())
    assert {
        "journal_entries",
        "signed_heads",
        "unsigned_prefixes",
        "blobs",
        "admission_tickets",
        "recovery_actions",
        "reconciliations",
        "policy_revisions",
    } == set(APPEND_ONLY)
    assert not LEDGER_ACCESS["unsigned_prefixes"].insert  # the migrator's and operator's alone
    assert LEDGER_ACCESS["policy_revisions"].privileges() == (
        "SELECT",
        "INSERT",
        "UPDATE (revision)",
    )


def test_the_scan_finds_the_statements_it_must() -> None:
    used = {(use.table, use.kind) for use in ledger_uses()}
    assert {
        ("runs", "UPDATE"),
        ("execution_requests", "UPDATE"),
        ("journal_entries", "INSERT"),
        ("signed_heads", "INSERT"),
        ("execution_requests", "LOCK"),
        ("runs", "LOCK"),
    } <= used


@pytest.mark.parametrize(
    "statement",
    [
        "update(journal_entries).values(actor='x')",
        "journal_entries.update().values(actor='x')",
        "delete(signed_heads)",
        "sa.delete(blobs)",
        "postgresql.insert(admission_tickets).on_conflict_do_update(index_elements=[], set_={})",
        "text('UPDATE journal_entries SET actor = :a')",
        "text('DELETE FROM signed_heads WHERE run_id = :r')",
        "select(journal_entries).with_for_update(of=journal_entries)",
        "select(journal_entries).with_for_update()",
    ],
)
def test_a_change_of_an_append_only_table_is_found_and_refused(statement: str) -> None:
    source = (
        "from sqlalchemy import delete, select, text, update\n"
        "from sqlalchemy.dialects import postgresql\n"
        "import sqlalchemy as sa\n"
        "from services.ledger.schema import admission_tickets, blobs, journal_entries, "
        "signed_heads\n"
        f"STATEMENT = {statement}\n"
    )
    uses = statement_uses(source, "sample.py")
    assert uses, statement
    assert any(
        use.table not in LEDGER_ACCESS or not _permits(LEDGER_ACCESS[use.table], use.kind)
        for use in uses
    ), uses


def test_the_ledger_role_is_a_plain_identifier() -> None:
    assert ledger_role({}) == "forge_ledger"
    assert ledger_role({"FORGE_DB_LEDGER_ROLE": "site_ledger"}) == "site_ledger"
    for bad in ("Forge", "forge-ledger", 'x"; DROP ROLE postgres; --', "a" * 64):
        with pytest.raises(ValueError, match="FORGE_DB_LEDGER_ROLE"):
            ledger_role({"FORGE_DB_LEDGER_ROLE": bad})
