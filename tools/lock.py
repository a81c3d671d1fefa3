"""The dependency lock files (ADR 0050): every package the project installs, pinned with hashes.

    python tools/lock.py            regenerate both files with uv (`make lock`); existing pins
                                    are kept unless pyproject.toml no longer allows them
    python tools/lock.py --upgrade-package NAME ...   and move NAME to its newest allowed release
    python tools/lock.py --check    every requirement of pyproject.toml is locked (`make lint`)

``requirements.lock`` holds the services' dependencies (the image installs it);
``requirements-dev.lock`` holds those same pins plus the ``dev`` extra (``make install`` and CI
install it). Both also pin the build system (``[build-system] requires``) and pip itself, so the
project installs with ``--no-deps --no-build-isolation`` and nothing is fetched unpinned.

The files are resolved for CPython 3.11 on Linux x86_64, the project's only Python; each pin
carries the hash of every file its release publishes, so Linux aarch64 installs the same set.
They change only on purpose: after an edit of pyproject.toml's dependencies, ``make lock``, and
the check (exit status 1, naming each requirement) fails until then.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_LOCK = "requirements.lock"
DEV_LOCK = "requirements-dev.lock"
#: Installed before the project and pinned like everything else, though pyproject.toml does not
#: list it: the installer that checks the hashes.
INSTALLER = "pip"
_TARGET = ["--python-version", "3.11", "--python-platform", "x86_64-unknown-linux-gnu"]
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


@dataclass(frozen=True)
class Pin:
    version: str
    hashes: int


def pins(text: str) -> dict[str, Pin]:
    """Each package a lock file pins, with its version and how many hashes it carries."""
    found: dict[str, Pin] = {}
    name = ""
    for line in text.splitlines():
        if match := _PIN.match(line):
            name = canonicalize_name(match.group(1))
            found[name] = Pin(match.group(2), 0)
        elif name and line.strip().startswith("--hash=sha256:"):
            found[name] = Pin(found[name].version, found[name].hashes + 1)
        elif not line.startswith(" "):
            name = ""
    return found


@dataclass(frozen=True)
class Requirements:
    """What pyproject.toml asks for, by lock file."""

    runtime: tuple[Requirement, ...]
    dev: tuple[Requirement, ...]
    build: tuple[Requirement, ...]

    @classmethod
    def of(cls, pyproject: Path) -> Requirements:
        held = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        project = held["project"]
        return cls(
            runtime=tuple(map(Requirement, project["dependencies"])),
            dev=tuple(map(Requirement, project["optional-dependencies"]["dev"])),
            build=(*map(Requirement, held["build-system"]["requires"]), Requirement(INSTALLER)),
        )


def problems(root: Path = ROOT) -> list[str]:
    """Every requirement of ``root``'s pyproject.toml that its lock files do not satisfy, every
    pin without a hash, and every runtime pin the dev lock pins otherwise."""
    wanted = Requirements.of(root / "pyproject.toml")
    found: list[str] = []
    locked: dict[str, dict[str, Pin]] = {}
    for lock, requirements in (
        (RUNTIME_LOCK, (*wanted.runtime, *wanted.build)),
        (DEV_LOCK, (*wanted.runtime, *wanted.dev, *wanted.build)),
    ):
        path = root / lock
        if not path.is_file():
            found.append(f"{lock} is missing: run 'make lock'")
            continue
        locked[lock] = pins(path.read_text(encoding="utf-8"))
        found += _unsatisfied(lock, locked[lock], requirements)
        found += [f"{lock}: {name} has no hash" for name, p in locked[lock].items() if not p.hashes]
    if len(locked) == 2:
        for name, pin in locked[RUNTIME_LOCK].items():
            other = locked[DEV_LOCK].get(name)
            if other is None or other.version != pin.version:
                found.append(
                    f"{RUNTIME_LOCK} pins {name}=={pin.version}, {DEV_LOCK} "
                    f"{other.version if other else 'nothing'}: run 'make lock'"
                )
    return found


def _unsatisfied(lock: str, locked: dict[str, Pin], wanted: Iterable[Requirement]) -> list[str]:
    found = []
    for requirement in wanted:
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        pin = locked.get(canonicalize_name(requirement.name))
        if pin is None:
            found.append(f"{lock} does not pin {requirement}: run 'make lock'")
        elif not requirement.specifier.contains(pin.version, prereleases=True):
            found.append(f"{lock} pins {requirement.name}=={pin.version}, outside {requirement}")
        else:
            found += [
                f"{lock} does not pin {extra}, which {requirement} needs: run 'make lock'"
                for extra in _extra_packages(requirement)
                if extra not in locked
            ]
    return found


def _extra_packages(requirement: Requirement) -> list[str]:
    """The packages an extra adds, as far as the installed distribution's metadata tells."""
    if not requirement.extras:
        return []
    from importlib import metadata

    try:
        requires = metadata.requires(requirement.name) or []
    except metadata.PackageNotFoundError:
        return []
    added: list[str] = []
    for line in requires:
        needed = Requirement(line)
        if needed.marker is None:
            continue
        if any(needed.marker.evaluate({"extra": extra}) for extra in requirement.extras) and (
            needed.marker.evaluate({"extra": ""}) is False
        ):
            added.append(canonicalize_name(needed.name))
    return added


def _uv() -> str:
    """uv from the environment running this script (the dev extra installs it), else PATH's."""
    beside = Path(sys.executable).with_name("uv")
    return str(beside) if beside.is_file() else "uv"


def lock(root: Path = ROOT, upgrade: Iterable[str] = ()) -> None:
    """Resolve both files again with uv: the runtime set first, then the dev set constrained to
    it, so the image and the developers run the same versions of what they share."""
    wanted = Requirements.of(root / "pyproject.toml")
    build = "".join(f"{requirement}\n" for requirement in wanted.build)
    common = [
        _uv(),
        *("pip", "compile", "pyproject.toml", "-", "--generate-hashes", "--quiet"),
        *_TARGET,
        *("--custom-compile-command", "make lock"),
        *(option for name in upgrade for option in ("--upgrade-package", name)),
    ]
    for command in (
        [*common, "-o", RUNTIME_LOCK],
        [*common, "--extra", "dev", "-c", RUNTIME_LOCK, "-o", DEV_LOCK],
    ):
        subprocess.run(command, input=build, text=True, cwd=root, check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="check the lock files, write nothing")
    parser.add_argument(
        "--upgrade-package",
        action="append",
        default=[],
        metavar="NAME",
        help="resolve NAME to its newest allowed release (repeatable)",
    )
    args = parser.parse_args(argv)
    if not args.check:
        lock(upgrade=args.upgrade_package)
    found = problems()
    for problem in found:
        print(problem, file=sys.stderr)
    if not found:
        print(f"{RUNTIME_LOCK} and {DEV_LOCK} cover pyproject.toml")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
