"""Every SQL statement of the ledger lives under services/ledger/repository (plus the table
definitions, migrations and engine set-up): no other ledger module builds SQL."""

from __future__ import annotations

import ast
from pathlib import Path

LEDGER = Path(__file__).resolve().parents[2] / "services" / "ledger"
ALLOWED = ("repository/", "migrations/", "schema.py", "database.py", "migrate.py")
SQL_BUILDERS = frozenset(
    {"select", "insert", "update", "delete", "text", "func", "and_", "or_", "literal", "column"}
)


def sql_uses(path: Path) -> list[str]:
    """Names of SQL builders a module imports from sqlalchemy, and raw SQL it executes."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy"):
            found += [alias.name for alias in node.names if alias.name in SQL_BUILDERS]
            found += [f"{node.module}.*" for alias in node.names if alias.name == "*"]
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("sqlalchemy")]
        if isinstance(node, ast.Attribute) and node.attr in {"exec_driver_sql", "execute"}:
            found.append(node.attr)
    return found


def test_no_sql_is_built_outside_the_repository() -> None:
    offenders = {
        str(path.relative_to(LEDGER)): uses
        for path in sorted(LEDGER.rglob("*.py"))
        if not str(path.relative_to(LEDGER)).startswith(ALLOWED) and (uses := sql_uses(path))
    }
    assert not offenders, f"SQL outside services/ledger/repository: {offenders}"


def test_the_scan_finds_sql(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import sqlalchemy\nfrom sqlalchemy import select, Connection\n"
        "def f(c: Connection) -> None:\n    c.execute(select(1))\n"
    )
    assert sql_uses(sample) == ["sqlalchemy", "select", "execute"]
