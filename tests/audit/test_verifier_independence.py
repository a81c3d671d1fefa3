"""forge-continuity-verify imports nothing of ours: only the standard library, rfc8785 and
cryptography (its own package aside), so a bundle is checked by code that shares nothing with
what wrote it."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tools" / "audit" / "forge_audit"
ALLOWED_THIRD_PARTY = frozenset({"rfc8785", "cryptography"})


def imported_modules(path: Path) -> set[str]:
    """The top-level module of every import in ``path`` (relative imports as themselves)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add("." if node.level else (node.module or "").split(".")[0])
    return found


def test_the_verifier_imports_only_the_standard_library_rfc8785_and_cryptography() -> None:
    sources = sorted(PACKAGE.rglob("*.py"))
    assert {path.name for path in sources} >= {"verify.py", "checks.py", "jcs.py", "records.py"}
    foreign = {
        str(path.relative_to(ROOT)): sorted(
            name
            for name in imported_modules(path)
            if name not in sys.stdlib_module_names
            and name not in ALLOWED_THIRD_PARTY
            and name != "forge_audit"
        )
        for path in sources
    }
    assert not {path: names for path, names in foreign.items() if names}, foreign


def test_the_scan_sees_a_foreign_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import json\nfrom shared.continuity import canonical\nfrom . import jcs\n"
        "import services.ledger\n",
        encoding="utf-8",
    )
    assert imported_modules(sample) == {"json", "shared", ".", "services"}


def test_it_is_its_own_console_script() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["scripts"]["forge-continuity-verify"] == "forge_audit.verify:main"
    found = project["tool"]["setuptools"]["packages"]["find"]
    assert "tools/audit" in found["where"] and "forge_audit*" in found["include"]
    # its two libraries are runtime dependencies, not development extras
    dependencies = " ".join(project["project"]["dependencies"])
    assert "rfc8785" in dependencies and "cryptography" in dependencies
