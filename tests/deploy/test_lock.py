"""The hash-pinned lock files cover pyproject.toml (tools/lock.py, ADR 0050): a dependency added,
or moved out of its locked version, without `make lock` fails here and in `make lint`; and every
installer (make, CI through make, the image) installs from them with hashes."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tools.lock import DEV_LOCK, RUNTIME_LOCK, pins, problems

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """pyproject.toml and both lock files, as the repository has them, to edit."""
    for name in ("pyproject.toml", RUNTIME_LOCK, DEV_LOCK):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_the_lock_files_cover_every_requirement_with_hashes() -> None:
    assert problems(ROOT) == []
    runtime = pins((ROOT / RUNTIME_LOCK).read_text(encoding="utf-8"))
    # The transitive set, not only what pyproject.toml names, and the installer and build system.
    assert {"grpcio", "protobuf", "h11", "pip", "setuptools", "wheel"} <= set(runtime)
    assert "pytest" not in runtime, "the image's lock holds the services' dependencies only"


def test_a_dependency_added_without_relocking_is_named(copy: Path) -> None:
    edit(
        copy / "pyproject.toml",
        '  "rfc8785==0.1.4",\n',
        '  "rfc8785==0.1.4",\n  "tomli-w==1.2.0",\n',
    )
    found = problems(copy)
    assert f"{RUNTIME_LOCK} does not pin tomli-w==1.2.0: run 'make lock'" in found
    assert f"{DEV_LOCK} does not pin tomli-w==1.2.0: run 'make lock'" in found


def test_a_dev_dependency_added_without_relocking_is_named(copy: Path) -> None:
    edit(copy / "pyproject.toml", '  "pytest==9.2.0",\n', '  "pytest==9.2.0",\n  "tomli-w",\n')
    assert problems(copy) == [f"{DEV_LOCK} does not pin tomli-w: run 'make lock'"]


def test_a_requirement_moved_off_its_locked_version_is_named(copy: Path) -> None:
    edit(copy / "pyproject.toml", '"grpcio==1.85.1"', '"grpcio==1.86.0"')
    found = problems(copy)
    assert f"{RUNTIME_LOCK} pins grpcio==1.85.1, outside grpcio==1.86.0" in found


def test_a_pin_without_a_hash_and_a_drifted_dev_pin_are_named(copy: Path) -> None:
    lock = copy / RUNTIME_LOCK
    text = lock.read_text(encoding="utf-8")
    lock.write_text(re.sub(r"(?m)^(h11==\S+) \\\n(    --hash=\S+( \\)?\n)+", r"\1\n", text))
    edit(copy / DEV_LOCK, "\nalembic==", "\nalembic==0.0.1\nformer-alembic==")
    found = problems(copy)
    assert f"{RUNTIME_LOCK}: h11 has no hash" in found
    assert any(p.startswith(f"{RUNTIME_LOCK} pins alembic==") for p in found), found


def test_every_installer_takes_the_lock_with_hashes() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "--require-hashes -r requirements-dev.lock" in makefile
    assert "--no-deps --no-build-isolation -e ." in makefile
    installs = re.findall(r"(?m)^\t.*(?:pip install|\$\(PIP_INSTALL\)).*$", makefile)
    assert len(installs) == 2, installs
    assert all("--require-hashes" in line or "--no-deps" in line for line in installs), installs
    # CI installs through `make test`, never with a pip of its own.
    assert "pip install" not in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
