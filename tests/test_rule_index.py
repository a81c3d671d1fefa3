"""The rule index in docs/architecture.md names real code and real tests.

Every "enforced in" cell must name an existing file (or package) and, where it names functions or
classes, ones defined there; every "test" cell must name an existing test file and test function.
A rename that forgets the index fails here instead of leaving the document wrong."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
CODE = re.compile(r"`([^`]+)`")


def _rows() -> list[list[str]]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Rule index", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    cells = [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]
    return [row for row in cells[1:] if row[0] != "rule"]


def _defined_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    } | {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }


def test_the_index_has_rows() -> None:
    assert len(_rows()) >= 30


@pytest.mark.parametrize("row", _rows(), ids=lambda row: row[0][:60])
def test_each_row_names_existing_code_and_tests(row: list[str]) -> None:
    assert len(row) == 4, row
    enforced, test = CODE.findall(row[2]), CODE.findall(row[3])
    assert enforced and test, row
    path: Path | None = None
    for item in enforced:
        if ":" in item or "/" in item:
            location, _, name = item.partition(":")
            path = ROOT / location
            assert path.exists(), f"{location} does not exist"
        else:
            name = item
        if name:
            assert path is not None and path.is_file(), item
            assert name in _defined_names(path), f"{name} is not defined in {path}"
    for item in test:
        location, _, name = item.partition("::")
        test_path = ROOT / location
        assert test_path.is_file(), f"{location} does not exist"
        if name:
            assert name in _defined_names(test_path), f"{name} is not a test in {location}"
