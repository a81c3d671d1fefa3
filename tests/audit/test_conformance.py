"""The conformance vectors of ``forge.continuity.audit-bundle/1`` (tools/audit/vectors/README.md):
every verifier implementation, run as its own program with each vector's options, reaches the
outcome the index states (worked out from docs/formats.md): the exit status and, with ``--json``,
``valid``, ``problem``, ``first_broken_sequence`` and ``line``.

Implementations: the Python verifier (``python -m forge_audit.verify`` given only its own package),
the Node.js one (``node tools/audit/js/verify.mjs``) when it exists and ``node`` is on PATH, and
any other named by ``FORGE_AUDIT_VERIFIER`` (a command prefix, e.g. ``"java -jar verify.jar"``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tools" / "audit" / "vectors" / "v1"
INDEX = json.loads((VECTORS / "index.json").read_text(encoding="utf-8"))
NODE_VERIFIER = ROOT / "tools" / "audit" / "js" / "verify.mjs"
COMPARED = ("exit_status", "valid", "problem", "first_broken_sequence", "line")


def implementations() -> Iterator[Any]:
    python = [sys.executable, "-m", "forge_audit.verify"]
    yield pytest.param(python, id="python")
    node = shutil.which("node")
    reason = (
        "no Node.js on PATH"
        if node is None
        else f"{NODE_VERIFIER.relative_to(ROOT)} does not exist"
        if not NODE_VERIFIER.exists()
        else ""
    )
    yield pytest.param(
        [node or "node", str(NODE_VERIFIER)],
        id="node",
        marks=[pytest.mark.skip(reason=f"Node.js verifier not run: {reason}")] if reason else [],
    )
    other = os.environ.get("FORGE_AUDIT_VERIFIER", "")
    if other:
        yield pytest.param(shlex.split(other), id="FORGE_AUDIT_VERIFIER")


def materialize(vector: dict[str, Any], into: Path) -> Path:
    """The bundle a vector names: a committed file, or one written from the parts its
    ``generate`` lists (a committed file, or one character repeated ``count`` times)."""
    name: str = vector["bundle"]
    if "generate" not in vector:
        return VECTORS / name
    path = into / name
    if path.exists():
        return path
    with path.open("wb") as out:
        for part in vector["generate"]:
            if "file" in part:
                out.write((VECTORS / part["file"]).read_bytes())
                continue
            chunk = part["repeat"].encode("utf-8") * (1 << 20)
            remaining = part["count"] * len(part["repeat"].encode("utf-8"))
            while remaining:
                written = out.write(chunk[: min(remaining, len(chunk))])
                remaining -= written
    return path


def arguments(vector: dict[str, Any], bundle: Path) -> list[str]:
    """The CLI every implementation takes (docs/formats.md, "What the verifier checks")."""
    options = vector["options"]
    found = ["--json"]
    for key in options["trusted_keys"]:
        found += ["--trusted-key", str(VECTORS / key)]
    if options["trust_bundle_keys"]:
        found.append("--trust-bundle-keys")
    if options["known_heads"]:
        found += ["--known-heads", str(VECTORS / options["known_heads"])]
    if options["require_blobs"]:
        found.append("--require-blobs")
    if options["allow_unsigned_head"]:
        found.append("--allow-unsigned-head")
    return [*found, str(bundle)]


def outcome(command: list[str], vector: dict[str, Any], bundle: Path) -> dict[str, Any]:
    """What an implementation reached: its exit status and, unless it refused to run (2), the
    compared members of its --json output."""
    done = subprocess.run(
        [*command, *arguments(vector, bundle)],
        env={**os.environ, "PYTHONPATH": str(ROOT / "tools" / "audit")},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    found: dict[str, Any] = dict.fromkeys(COMPARED)
    found["exit_status"] = done.returncode
    if done.returncode in (0, 1):
        try:
            shown = json.loads(done.stdout)
        except ValueError:
            shown = {"unreadable --json output": done.stdout[-500:], "stderr": done.stderr[-500:]}
        for name in COMPARED[1:]:
            found[name] = (
                shown.get(name) if shown.get("valid") is False or name == "valid" else None
            )
    return found


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("generated-vectors")


@pytest.mark.parametrize("command", list(implementations()))
@pytest.mark.parametrize("vector", INDEX["vectors"], ids=lambda vector: vector["name"])
def test_each_implementation_reaches_the_stated_outcome(
    command: list[str], vector: dict[str, Any], generated: Path
) -> None:
    bundle = materialize(vector, generated)
    try:
        found = outcome(command, vector, bundle)
    finally:
        if "generate" in vector:
            bundle.unlink(missing_ok=True)  # 24 MiB each: made again if needed
    expected = {name: vector["expect"][name] for name in COMPARED}
    assert found == expected, f"{vector['name']}: {vector['change']} ({vector['why']})"


def _documented_problems() -> set[str]:
    """Every problem name in the problems table of docs/formats.md ("What the verifier checks")."""
    text = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    section = text.split("### What the verifier checks", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    cells = [row.rstrip(" |").rsplit(" | ", 1)[-1] for row in rows[1:]]  # the problem column
    named = {name for cell in cells for name in re.findall(r"`([a-z_]+)`", cell)}
    # what the column names besides problems: a record type it reports, a payload member
    return named - {"blob_absent", "command_id"}


def test_the_vectors_cover_every_problem_and_rule() -> None:
    vectors = INDEX["vectors"]
    problems = {v["expect"]["problem"] for v in vectors if v["expect"]["problem"]}
    documented = _documented_problems()
    assert len(documented) == 41, sorted(documented)
    assert documented <= problems, sorted(documented - problems)
    assert problems <= documented, sorted(problems - documented)
    rules = {rule for v in vectors for rule in v["rules"]}
    assert {f"N{n}" for n in range(1, 22)} | {"N13a"} <= rules
    statuses = {v["expect"]["exit_status"] for v in vectors}
    assert statuses == {0, 1, 2}
    for vector in vectors:
        assert vector["why"] and vector["change"], vector["name"]
        files = [part["file"] for part in vector.get("generate", []) if "file" in part]
        if "generate" not in vector and vector["expect"]["exit_status"] != 2:
            files.append(vector["bundle"])
        options = vector["options"]
        files += options["trusted_keys"] + [options["known_heads"] or "index.json"]
        for name in files:
            assert (VECTORS / name).is_file(), f"{vector['name']}: {name}"
        # small enough to read: only the generated vectors are large
        if "generate" not in vector and (VECTORS / vector["bundle"]).is_file():
            assert (VECTORS / vector["bundle"]).stat().st_size < 64 * 1024, vector["name"]


def test_the_committed_vectors_are_what_the_generator_writes() -> None:
    """The vectors come from real runs through the services (fixed clock, fixed test key) and
    edits of them; regenerating them gives the same bytes (make vectors-check)."""
    done = subprocess.run(
        [sys.executable, "-m", "tools.audit.vectors.generate", "--check"],
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                str(path) for path in (ROOT, ROOT / "shared" / "gen", ROOT / "tools" / "audit")
            ),
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
