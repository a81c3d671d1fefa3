"""Every error reason the code raises, found by reading its syntax tree (no import, no run).

A *raise site* is a call whose first argument is an UPPER_SNAKE string constant (or a conditional
between two) and whose callee is

- a ``shared.runtime.errors`` DomainError subclass (``NotFound("RUN_NOT_FOUND", ...)``);
- a *refusal helper*: a function of the same module that passes its first parameter as the reason
  of such a class (``def _refuse(reason, ...): return FailedPrecondition(reason, ...)``);
- a constructor listed in :data:`INDIRECT_CONSTRUCTORS`, whose reasons are raised elsewhere under
  a fixed code.

Metadata keys are best effort: the constant keys of a ``metadata={...}`` literal (following
``**NAME`` into a module-level dict literal), plus, for a helper that takes ``**metadata``, the
keyword names at the call site.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from shared.runtime import errors
from shared.runtime.errors import DomainError, ErrorKind

ROOT = Path(__file__).resolve().parents[3]
SCANNED = ("services", "shared")
ERROR_CLASSES: dict[str, ErrorKind] = {
    name: value.kind
    for name, value in vars(errors).items()
    if isinstance(value, type) and issubclass(value, DomainError) and value is not DomainError
}
# Reconstruction analysis builds ``Hold(reason, element, message)``; areconstruct_invalid_read
# raises each as ``FailedPrecondition(hold.reason, ..., metadata={"element": ...})``.
INDIRECT_CONSTRUCTORS: dict[str, tuple[ErrorKind, frozenset[str]]] = {
    "Hold": (ErrorKind.FAILED_PRECONDITION, frozenset({"element"})),
}
_NOT_METADATA = frozenset({"metadata", "field_violations", "precondition_violations"})


@dataclass(frozen=True)
class RaiseSite:
    reason: str
    kind: ErrorKind
    metadata_keys: frozenset[str]
    where: str

    def __str__(self) -> str:
        return f"{self.where}: {self.kind.name} {self.reason}"


def _callee(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def _reasons(argument: ast.expr) -> list[str]:
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return [argument.value]
    if isinstance(argument, ast.IfExp):
        return _reasons(argument.body) + _reasons(argument.orelse)
    return []


def _module_dicts(tree: ast.Module) -> dict[str, frozenset[str]]:
    """Module-level ``NAME = {"key": ...}`` literals, by name."""
    found: dict[str, frozenset[str]] = {}
    for statement in tree.body:
        value = statement.value if isinstance(statement, ast.Assign | ast.AnnAssign) else None
        targets = (
            statement.targets
            if isinstance(statement, ast.Assign)
            else [statement.target]
            if isinstance(statement, ast.AnnAssign)
            else []
        )
        if isinstance(value, ast.Dict):
            keys = frozenset(k.value for k in value.keys if isinstance(k, ast.Constant) and k.value)
            found.update({t.id: keys for t in targets if isinstance(t, ast.Name)})
    return found


def _metadata_keys(node: ast.Call, module_dicts: dict[str, frozenset[str]]) -> frozenset[str]:
    keys: set[str] = set()
    for keyword in node.keywords:
        if keyword.arg == "metadata" and isinstance(keyword.value, ast.Dict):
            for key, value in zip(keyword.value.keys, keyword.value.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    keys.add(key.value)
                elif key is None and isinstance(value, ast.Name):
                    keys |= module_dicts.get(value.id, frozenset())
    return frozenset(keys)


@dataclass(frozen=True)
class _Helper:
    kind: ErrorKind
    metadata_keys: frozenset[str]
    keywords_are_metadata: bool


def _helpers(tree: ast.Module, module_dicts: dict[str, frozenset[str]]) -> dict[str, _Helper]:
    """Functions that pass their first parameter as the reason of a DomainError subclass."""
    helpers: dict[str, _Helper] = {}
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or not function.args.args:
            continue
        first = function.args.args[0].arg
        for node in ast.walk(function):
            if (
                isinstance(node, ast.Call)
                and _callee(node) in ERROR_CLASSES
                and node.args
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id == first
            ):
                helpers[function.name] = _Helper(
                    ERROR_CLASSES[_callee(node) or ""],
                    _metadata_keys(node, module_dicts),
                    function.args.kwarg is not None,
                )
    return helpers


def sites_in(source: str, where: str) -> Iterator[RaiseSite]:
    """The raise sites with a constant reason in one module's ``source``."""
    tree = ast.parse(source)
    module_dicts = _module_dicts(tree)
    helpers = _helpers(tree, module_dicts)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = _callee(node) or ""
        if name in ERROR_CLASSES:
            kind, keys = ERROR_CLASSES[name], _metadata_keys(node, module_dicts)
        elif name in helpers:
            helper = helpers[name]
            keys = helper.metadata_keys
            if helper.keywords_are_metadata:
                keys |= {k.arg for k in node.keywords if k.arg and k.arg not in _NOT_METADATA}
            kind = helper.kind
        elif name in INDIRECT_CONSTRUCTORS:
            kind, keys = INDIRECT_CONSTRUCTORS[name]
        else:
            continue
        for reason in _reasons(node.args[0]):
            yield RaiseSite(reason, kind, keys, f"{where}:{node.lineno}")


def raise_sites() -> Iterator[RaiseSite]:
    """Every raise site with a constant reason under ``services/`` and ``shared/``."""
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            where = path.relative_to(ROOT)
            if "gen" not in where.parts:
                yield from sites_in(path.read_text(encoding="utf-8"), str(where))


if __name__ == "__main__":
    found: dict[str, tuple[set[str], set[str], set[str]]] = {}
    for site in raise_sites():
        kinds, keys, places = found.setdefault(site.reason, (set(), set(), set()))
        kinds.add(site.kind.name)
        keys |= site.metadata_keys
        places.add(site.where.split(":")[0])
    for reason, (kinds, keys, places) in sorted(found.items()):
        print(reason, sorted(kinds), sorted(keys), sorted(places))
