"""The floors of the house, read from the import statements of every module (function-level and
relative imports included):

- the runtime (``shared/runtime``) imports nothing above it: not the rules
  (``shared.continuity``), not the contract (``shared.contract`` and its generated ``forge``
  modules), not a service. What it needs of them is passed in by each service's ``__main__``.
- nothing under ``shared/`` imports a service: the agent's home (``shared/agent``), the rules and
  the contract are shared by every service and program.
- no service or program under ``services/`` imports another one's internals. Internals are every
  module of ``services.<name>`` imported from outside ``services.<name>``, except the short list
  of public entry points below; the one composition root that starts every service may import
  what it starts.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RUNTIME_MAY_NOT_IMPORT = ("shared.continuity", "shared.contract", "forge", "services")

#: Modules of one service another may import, and why.
PUBLIC_ENTRY_POINTS = {
    # The Python client programs use (the README's `from services.client import
    # ContinuityClient`); the demo drives the services through it as any program would.
    "services.client": "the documented Python client",
}

#: Modules allowed to import any service's internals, and why.
COMPOSITION_ROOTS = {
    # `make run`: migrates the ledger's database, writes its development signing key and starts
    # every service and the gateway as processes.
    "services.runner": "starts every service",
}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(name: str, root: Path = ROOT) -> bool:
    base = root.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(path: Path, root: Path = ROOT) -> Iterator[str]:
    """The absolute name of every module ``path`` imports (``from a import b`` is ``a.b`` when
    ``b`` is a module of ours, else ``a``)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                yield submodule if _exists(submodule, root) else module


def sources(*folders: str) -> list[Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def runtime_violations(paths: list[Path], root: Path = ROOT) -> list[tuple[str, str]]:
    return [
        (module_name(path, root), imported)
        for path in paths
        for imported in imports_of(path, root)
        if any(_within(imported, above) for above in RUNTIME_MAY_NOT_IMPORT)
    ]


def _home(name: str) -> str:
    """``services.<name>`` for a module of a service package, else the module itself."""
    parts = name.split(".")
    return ".".join(parts[:2])


def service_violations(paths: list[Path], root: Path = ROOT) -> list[tuple[str, str]]:
    found = []
    for path in paths:
        importer = module_name(path, root)
        if importer in COMPOSITION_ROOTS:
            continue
        for imported in imports_of(path, root):
            if not _within(imported, "services") or imported in PUBLIC_ENTRY_POINTS:
                continue
            if imported != "services" and _home(imported) != _home(importer):
                found.append((importer, imported))
    return found


def test_the_runtime_imports_neither_the_rules_nor_the_contract_nor_a_service() -> None:
    paths = sources("shared/runtime")
    assert len(paths) > 20
    assert runtime_violations(paths) == []


def test_nothing_shared_imports_a_service() -> None:
    paths = [path for path in sources("shared") if "shared/gen" not in path.as_posix()]
    found = [
        (module_name(path), imported)
        for path in paths
        for imported in imports_of(path)
        if _within(imported, "services")
    ]
    assert found == []


def test_no_service_or_program_imports_another_ones_internals() -> None:
    paths = sources("services")
    homes = {_home(module_name(path)) for path in paths}
    assert {"services.worker", "services.demo", "services.client", "services.ledger"} <= homes
    assert service_violations(paths) == []


def test_the_exceptions_name_real_modules() -> None:
    for name in [*PUBLIC_ENTRY_POINTS, *COMPOSITION_ROOTS]:
        assert _exists(name), name


def test_the_scans_see_each_kind_of_crossing(tmp_path: Path) -> None:
    """Planted in a small tree of the same layout: a runtime module importing the rules lazily; a
    worker module importing the reconstruction's internals relatively and absolutely, beside
    imports that are allowed (the public client, its own package)."""
    for name in (
        "shared/runtime/late.py",
        "services/worker/reaching.py",
        "services/worker/run.py",
        "services/reconstruction/domain/pending.py",
        "services/reconstruction/worker_adapter/__init__.py",
        "services/client/__init__.py",
        "shared/continuity/canonical.py",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    runtime = tmp_path / "shared/runtime/late.py"
    runtime.write_text("def late() -> None:\n    from shared.continuity import canonical\n")
    worker = tmp_path / "services/worker/reaching.py"
    worker.write_text(
        "from ..reconstruction.domain import pending\n"
        "import services.reconstruction.worker_adapter\n"
        "from services.client import ContinuityClient\n"
        "from services.worker import run\n"
    )
    assert runtime_violations([runtime], tmp_path) == [
        ("shared.runtime.late", "shared.continuity.canonical")
    ]
    assert service_violations([worker], tmp_path) == [
        ("services.worker.reaching", "services.reconstruction.domain.pending"),
        ("services.worker.reaching", "services.reconstruction.worker_adapter"),
    ]
