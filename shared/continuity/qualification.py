"""The current qualified source profiles, each registered with the digest of the code it covers.

A profile names the complete installed worker and migration code (worker adapter, Agentic
version, target SDK). Continuity admission and worker claims require the run's profile to be a
registered profile whose digest equals the **installed profile digest**, computed once at
start-up from three parts (docs/formats.md, "Qualified profile digest"; ADR 0023):

- ``migration_code``: every file of the ledger's migrations (``services/ledger/migrations``);
- ``reconstruction_code``: every file of the reconstruction package (``services/reconstruction``),
  the agent (``shared/agent``) and the derived checkpoint's format (``derived_format.py``);
- ``sdk_distribution``: the pinned SDK's distribution record (name, version, RECORD).

The registry comes from ``FORGE_QUALIFIED_PROFILES_FILE`` (production: the release's registration,
deploy/qualified-profiles.json, is in the image). Unset, the development registry is computed: the
release's profile and every name in ``FORGE_QUALIFIED_SOURCE_PROFILES`` registered with the
installed digest, so `make run` and the tests qualify whatever code they run.

``python -m shared.continuity.qualification`` prints the installed digest and the registration an
operator adds to the file.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.continuity.canonical import digest_of, is_digest, parse_json, sha256_digest

# The profile qualified with this release: the installed worker adapter on Firefly Agentic
# 26.10.1 with the pinned target SDK pydantic-ai-slim 2.55.0.
DEFAULT_QUALIFIED_PROFILE = "forge-worker/firefly-agentic-26.10.1/pydantic-ai-2.55.0"
PINNED_SDK_DISTRIBUTION = "pydantic-ai-slim"
PROFILE_DIGEST_FORMAT = "forge.qualified-profile.v1"
REGISTRY_FORMAT = "forge.qualified-profiles.v1"
PROFILES_FILE_VARIABLE = "FORGE_QUALIFIED_PROFILES_FILE"
EXTRA_PROFILES_VARIABLE = "FORGE_QUALIFIED_SOURCE_PROFILES"
# The packages whose files the first two parts digest: the reconstruction code is the service and
# the agent it replays and resumes (the installed worker adapter, the sealed replay).
MIGRATION_PACKAGE = "services.ledger.migrations"
RECONSTRUCTION_PACKAGE = "services.reconstruction"
AGENT_PACKAGE = "shared.agent"
RECONSTRUCTION_PACKAGES = (RECONSTRUCTION_PACKAGE, AGENT_PACKAGE)
#: Modules outside those packages that write what a reconstruction returns, digested with them:
#: the derived checkpoint's envelope, witnesses and accountings (ADR 0055), so a change to those
#: bytes re-qualifies the profile like a change to the reconstruction itself.
RECONSTRUCTION_MODULES = ("shared.continuity.derived_format",)
# RECORD entries an installer writes (not the wheel's content): left out so the same wheel gives
# the same digest whichever installer put it there.
_INSTALLER_FILES = frozenset({"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"})
PART_LABELS: Mapping[str, str] = {
    "migration_code": "migration code",
    "reconstruction_code": "reconstruction code",
    "sdk_distribution": "SDK distribution",
}


class RegistryError(ValueError):
    """The registry file is missing, unreadable or malformed (the service does not start)."""


@dataclass(frozen=True)
class ProfileDigest:
    """The digests of the three parts a profile covers, and the profile digest over them."""

    migration_code: str
    reconstruction_code: str
    sdk_distribution: str

    @functools.cached_property
    def digest(self) -> str:
        # computed once per value: every claim, worker write and candidate compares two
        return digest_of({"format": PROFILE_DIGEST_FORMAT, **self.parts()})

    def parts(self) -> dict[str, str]:
        return {
            "migration_code": self.migration_code,
            "reconstruction_code": self.reconstruction_code,
            "sdk_distribution": self.sdk_distribution,
        }

    def differences(self, installed: ProfileDigest) -> list[str]:
        """One sentence per part where ``installed`` differs from this registration."""
        mine, theirs = self.parts(), installed.parts()
        return [
            f"{PART_LABELS[part]} differs (registered {mine[part]}, installed {theirs[part]})"
            for part in PART_LABELS
            if mine[part] != theirs[part]
        ]


def _files(root: Path, prefix: str = "") -> list[dict[str, str]]:
    if root.is_file():
        # a single module: its path is the tree name itself
        return [
            {"path": prefix.rstrip("/"), "sha256": hashlib.sha256(root.read_bytes()).hexdigest()}
        ]
    files = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if not path.is_file() or "__pycache__" in relative.parts or path.suffix == ".pyc":
            continue
        files.append(
            {
                "path": prefix + relative.as_posix(),
                "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            }
        )
    return files


def tree_digest(root: Path) -> str:
    """The canonical digest of every file under ``root``: the RFC 8785 array of
    ``{"path", "sha256"}`` sorted by relative POSIX path (bytecode caches left out)."""
    return digest_of(sorted(_files(root), key=lambda f: f["path"]))


def trees_digest(roots: Mapping[str, Path]) -> str:
    """:func:`tree_digest` over several trees at once, each file's path prefixed with its tree's
    name (``services/reconstruction/servicer.py``, ``shared/agent/agent.py``)."""
    files = [file for name, root in roots.items() for file in _files(root, f"{name}/")]
    return digest_of(sorted(files, key=lambda f: f["path"]))


def distribution_digest(name: str = PINNED_SDK_DISTRIBUTION) -> str:
    """The digest of an installed distribution's record: its name, version and the SHA-256 of
    its RECORD's hashed entries inside site-packages (sorted, one per line)."""
    dist = importlib.metadata.distribution(name)
    record = dist.read_text("RECORD") or ""
    entries = sorted(line for line in record.splitlines() if _wheel_entry(line))
    return digest_of(
        {
            "name": dist.metadata["Name"],
            "version": dist.version,
            "record": sha256_digest("\n".join(entries).encode("utf-8")),
        }
    )


def _wheel_entry(line: str) -> bool:
    path, _, rest = line.partition(",")
    hash_value = rest.partition(",")[0]
    if not hash_value or path.startswith("../") or path.startswith("/"):
        return False  # bytecode compiled at install time, or a script rewritten by the installer
    return not (".dist-info/" in path and path.rsplit("/", 1)[-1] in _INSTALLER_FILES)


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        # services.ledger.migrations is a plain directory beside its parent package.
        parent, _, child = package.rpartition(".")
        return _package_dir(parent) / child
    return Path(next(iter(spec.submodule_search_locations)))


def _module_file(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise RegistryError(f"module {module} is not installed")
    return Path(spec.origin)


@functools.cache
def installed_profile() -> ProfileDigest:
    """The installed code's profile digest (computed once per process)."""
    return ProfileDigest(
        migration_code=tree_digest(_package_dir(MIGRATION_PACKAGE)),
        reconstruction_code=trees_digest(
            {
                **{name.replace(".", "/"): _package_dir(name) for name in RECONSTRUCTION_PACKAGES},
                **{
                    name.replace(".", "/") + ".py": _module_file(name)
                    for name in RECONSTRUCTION_MODULES
                },
            }
        ),
        sdk_distribution=distribution_digest(),
    )


def registration(name: str, profile: ProfileDigest | None = None) -> dict[str, Any]:
    """The registry entry naming ``profile`` (default: the installed one) as ``name``."""
    profile = profile if profile is not None else installed_profile()
    return {"name": name, "digest": profile.digest, "parts": profile.parts()}


def registry_document(names: tuple[str, ...] = (DEFAULT_QUALIFIED_PROFILE,)) -> dict[str, Any]:
    return {"format": REGISTRY_FORMAT, "profiles": [registration(name) for name in names]}


def parse_registry(text: str) -> dict[str, ProfileDigest]:
    """Profiles by name from a registry document; every entry's digest must be its parts'."""
    try:
        document = parse_json(text)
    except ValueError as exc:
        raise RegistryError(f"not canonical-compatible JSON: {exc}") from exc
    if not isinstance(document, dict) or document.get("format") != REGISTRY_FORMAT:
        raise RegistryError(f"format must be {REGISTRY_FORMAT!r}")
    entries = document.get("profiles")
    if not isinstance(entries, list):
        raise RegistryError("profiles must be a list")
    profiles: dict[str, ProfileDigest] = {}
    for entry in entries:
        name, profile = _parse_entry(entry)
        if name in profiles:
            raise RegistryError(f"profile {name!r} is registered twice")
        profiles[name] = profile
    return profiles


def _parse_entry(entry: Any) -> tuple[str, ProfileDigest]:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise RegistryError("every profile needs a non-empty name")
    parts = entry.get("parts")
    if not isinstance(parts, dict) or set(parts) != set(PART_LABELS):
        raise RegistryError(
            f"profile {entry['name']!r}: parts must be exactly {sorted(PART_LABELS)}"
        )
    if not all(is_digest(v) for v in parts.values()):
        raise RegistryError(f"profile {entry['name']!r}: every part is a sha256: digest")
    profile = ProfileDigest(**parts)
    if entry.get("digest") != profile.digest:
        raise RegistryError(f"profile {entry['name']!r}: digest is not the digest of its parts")
    return entry["name"], profile


@functools.cache
def _file_registry(path: str) -> Mapping[str, ProfileDigest]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RegistryError(f"{PROFILES_FILE_VARIABLE}={path}: {exc.strerror}") from exc
    try:
        return parse_registry(text)
    except RegistryError as exc:
        raise RegistryError(f"{PROFILES_FILE_VARIABLE}={path}: {exc}") from exc


def registry(env: Mapping[str, str] | None = None) -> Mapping[str, ProfileDigest]:
    """The registered profiles: the file's, or (no file) the computed development registry."""
    env = os.environ if env is None else env
    path = env.get(PROFILES_FILE_VARIABLE, "")
    if path:
        return _file_registry(path)
    extra = env.get(EXTRA_PROFILES_VARIABLE, "")
    names = {DEFAULT_QUALIFIED_PROFILE, *(p.strip() for p in extra.split(",") if p.strip())}
    return {name: installed_profile() for name in names}


def qualification_problem(profile: str, env: Mapping[str, str] | None = None) -> str | None:
    """Why ``profile`` is not qualified now (None: it is)."""
    registered = registry(env).get(profile)
    if registered is None:
        return f"source profile {profile!r} is not a registered qualified profile"
    installed = installed_profile()
    if registered.digest == installed.digest:
        return None
    return (
        f"source profile {profile!r} is registered with digest {registered.digest} but the "
        f"installed code's digest is {installed.digest}: "
        + "; ".join(registered.differences(installed))
    )


def qualified_digest(profile: str, env: Mapping[str, str] | None = None) -> str | None:
    """The profile digest the registry qualifies for ``profile`` (None: not registered): what a
    worker's installed code must digest to (ADR 0045)."""
    registered = registry(env).get(profile)
    return registered.digest if registered is not None else None


def is_qualified(profile: str, env: Mapping[str, str] | None = None) -> bool:
    return qualification_problem(profile, env) is None


def load_at_startup(env: Mapping[str, str] | None = None) -> ProfileDigest:
    """Compute the installed digest and read the registry once, before serving, so a malformed
    registry file stops the service rather than its first call."""
    profile = installed_profile()
    registry(env)
    return profile


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shared.continuity.qualification",
        description="Print the installed profile digest and its registration (ADR 0023).",
    )
    parser.add_argument(
        "--name", default=DEFAULT_QUALIFIED_PROFILE, help="the profile name to register"
    )
    parser.add_argument(
        "--write", metavar="FILE", help="write a registry document naming the installed code"
    )
    parser.add_argument("--json", action="store_true", help="print the registration as JSON")
    args = parser.parse_args(argv)
    profile = installed_profile()
    if args.write:
        text = json.dumps(registry_document((args.name,)), indent=2) + "\n"
        Path(args.write).write_text(text, encoding="utf-8")
        print(f"wrote {args.write}: {args.name} {profile.digest}")
        return 0
    if args.json:
        print(json.dumps(registration(args.name, profile), indent=2))
        return 0
    print(f"profile digest       {profile.digest}")
    for part, label in PART_LABELS.items():
        print(f"{label:<21}{profile.parts()[part]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
