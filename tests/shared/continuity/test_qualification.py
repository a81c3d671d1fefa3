"""The qualified profile is a digest over the installed migration code, reconstruction code and
pinned SDK distribution; a registration naming another digest is not qualified, and says which
part differs (ADR 0023)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shared.continuity import qualification
from shared.continuity.qualification import (
    DEFAULT_QUALIFIED_PROFILE,
    PROFILES_FILE_VARIABLE,
    ProfileDigest,
    RegistryError,
    installed_profile,
    is_qualified,
    load_at_startup,
    qualification_problem,
    registration,
    registry_document,
    tree_digest,
)

ROOT = Path(__file__).resolve().parents[3]
OTHER = "sha256:" + "ab" * 32


def _registry_file(
    tmp_path: Path, profile: ProfileDigest, name: str = DEFAULT_QUALIFIED_PROFILE
) -> dict[str, str]:
    path = tmp_path / "profiles.json"
    document = {"format": qualification.REGISTRY_FORMAT, "profiles": [registration(name, profile)]}
    path.write_text(json.dumps(document), encoding="utf-8")
    return {PROFILES_FILE_VARIABLE: str(path)}


def test_the_tree_digest_is_canonical_and_covers_every_byte(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for root, order in ((first, ("x.py", "sub/y.py")), (second, ("sub/y.py", "x.py"))):
        for name in order:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(b"print(1)\n" if name == "x.py" else b"y = 2\n")
    assert tree_digest(first) == tree_digest(second)
    (second / "__pycache__").mkdir()
    (second / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0compiled")
    assert tree_digest(first) == tree_digest(second), "bytecode caches are not code"
    (second / "sub" / "y.py").write_bytes(b"y = 3\n")
    assert tree_digest(first) != tree_digest(second)
    (second / "sub" / "y.py").write_bytes(b"y = 2\n")
    (second / "sub" / "z.py").write_bytes(b"")
    assert tree_digest(first) != tree_digest(second), "an added file changes the digest"


def test_the_installed_profile_covers_the_three_parts() -> None:
    profile = installed_profile()
    assert profile.migration_code == tree_digest(ROOT / "services" / "ledger" / "migrations")
    assert profile.reconstruction_code == qualification.trees_digest(
        {
            "services/reconstruction": ROOT / "services" / "reconstruction",
            "shared/agent": ROOT / "shared" / "agent",
            # what the reconstruction returns is written here (ADR 0055): a change to it must
            # re-qualify the profile like a change to the reconstruction
            "shared/continuity/derived_format.py": ROOT
            / "shared"
            / "continuity"
            / "derived_format.py",
        }
    )
    assert profile.sdk_distribution == qualification.distribution_digest("pydantic-ai-slim")
    assert len({profile.digest, *profile.parts().values()}) == 4


def test_the_development_registry_names_the_installed_digest() -> None:
    env = {qualification.EXTRA_PROFILES_VARIABLE: "forge-worker/next"}
    assert is_qualified(DEFAULT_QUALIFIED_PROFILE, env)
    assert is_qualified("forge-worker/next", env)
    problem = qualification_problem("forge-worker/unregistered", env)
    assert problem is not None and "not a registered" in problem


@pytest.mark.parametrize(
    ("part", "label"),
    [
        ("migration_code", "migration code"),
        ("reconstruction_code", "reconstruction code"),
        ("sdk_distribution", "SDK distribution"),
    ],
)
def test_a_registration_of_other_code_is_not_qualified_and_names_the_part(
    tmp_path: Path, part: str, label: str
) -> None:
    installed = installed_profile()
    registered = ProfileDigest(**{**installed.parts(), part: OTHER})
    env = _registry_file(tmp_path, registered)
    assert not is_qualified(DEFAULT_QUALIFIED_PROFILE, env)
    problem = qualification_problem(DEFAULT_QUALIFIED_PROFILE, env)
    assert problem is not None
    assert f"{label} differs (registered {OTHER}, installed {installed.parts()[part]})" in problem
    assert registered.digest in problem and installed.digest in problem
    assert sum(text in problem for text in qualification.PART_LABELS.values()) == 1


def test_a_registry_file_replaces_the_development_registry(tmp_path: Path) -> None:
    env = {
        **_registry_file(tmp_path, installed_profile(), name="forge-worker/registered"),
        qualification.EXTRA_PROFILES_VARIABLE: DEFAULT_QUALIFIED_PROFILE,
    }
    assert is_qualified("forge-worker/registered", env)
    assert not is_qualified(DEFAULT_QUALIFIED_PROFILE, env)


@pytest.mark.parametrize(
    "document",
    [
        "not json",
        {"format": "other", "profiles": []},
        {"format": qualification.REGISTRY_FORMAT, "profiles": [{"name": "p"}]},
        {
            "format": qualification.REGISTRY_FORMAT,
            "profiles": [{**registration("p"), "digest": OTHER}],
        },
        {"format": qualification.REGISTRY_FORMAT, "profiles": [registration("p")] * 2},
    ],
    ids=["not-json", "format", "no-parts", "digest-not-of-parts", "twice"],
)
def test_a_malformed_registry_stops_start_up(tmp_path: Path, document: object) -> None:
    path = tmp_path / "bad.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document), "utf-8")
    with pytest.raises(RegistryError):
        load_at_startup({PROFILES_FILE_VARIABLE: str(path)})
    with pytest.raises(RegistryError):
        load_at_startup({PROFILES_FILE_VARIABLE: str(tmp_path / "absent.json")})


def test_the_release_registration_in_the_image_matches_the_installed_code() -> None:
    """deploy/qualified-profiles.json is what the image registers; regenerate it with
    `python -m shared.continuity.qualification --write deploy/qualified-profiles.json` after
    qualifying a change to the migration or reconstruction code or the SDK."""
    text = (ROOT / "deploy" / "qualified-profiles.json").read_text(encoding="utf-8")
    assert json.loads(text) == registry_document()


def test_the_command_prints_the_installed_digest_for_registration() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "shared.continuity.qualification", "--json"],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert json.loads(shown.stdout) == registration(DEFAULT_QUALIFIED_PROFILE)
    plain = subprocess.run(
        [sys.executable, "-m", "shared.continuity.qualification"],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert installed_profile().digest in plain.stdout
