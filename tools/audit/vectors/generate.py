"""Write the conformance vectors of ``forge.continuity.audit-bundle/1`` into
``tools/audit/vectors/v1`` (tools/audit/vectors/README.md), byte for byte the same on every run.

Real bundles come from real runs (real_runs.py: the services in-process, a fixed clock, a fixed
test key, the real exporter); every other vector is one of them with one rule broken
(drafts.py), its expected outcome worked out from docs/formats.md: the problem, the sequence it
is named at and the bundle line, with the rule that decides it.

This module holds the ``Suite`` (the files and vectors being built, ``add`` and ``case``, the
order of the sections, the index) and the command line; the vectors themselves are in
``cases/`` (one module per group of sections), the files they share in material.py and the
index's record in vector.py.

Usage, from the repository root (``make vectors``, ``make vectors-check``)::

    python -m tools.audit.vectors.generate           # rewrite tools/audit/vectors/v1
    python -m tools.audit.vectors.generate --check   # fail if the committed vectors differ
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vectors.cases import (
    admission,
    blobs,
    heads,
    journal,
    lines,
    real,
    records,
    signatures,
    trailer,
    usage,
)
from vectors.drafts import Draft, key_id
from vectors.material import compact, heads_files, key_files
from vectors.real_runs import generate_real_runs, test_key
from vectors.vector import Vector, describe

ROOT = Path(__file__).resolve().parents[3]
VECTORS = ROOT / "tools" / "audit" / "vectors" / "v1"
SUITE = "forge.continuity.audit-bundle/1 conformance vectors"
SUITE_VERSION = 1
BUNDLE_FORMAT = "forge.continuity.audit-bundle/1"


class Suite:
    """Every vector, built from the real runs."""

    def __init__(self, workdir: Path) -> None:
        self.ledger_key = test_key("ledger signing key")
        self.other_key = test_key("another key, which no ledger published")
        self.keys = {key_id(k): k for k in (self.ledger_key, self.other_key)}
        runs = generate_real_runs(workdir, self.ledger_key)
        self.real = runs
        self.files: dict[str, bytes] = {}
        self.vectors: list[Vector] = []
        #: the records of bundles several vectors share, to say what stands on a line
        self.drafts: dict[str, Draft] = {}
        self.small = Draft.of(runs.bundles["run-small"], self.keys)
        self.admitted = compact(Draft.of(runs.bundles["run-admitted"], self.keys))
        self.files.update(key_files(runs, self.other_key))
        self.files.update(heads_files(runs, self.small, self.ledger_key, self.other_key, self.keys))

    # --- adding vectors ------------------------------------------------------------------------

    def add(self, vector: Vector, bundle: bytes | None = None) -> None:
        shared = self.drafts.get(vector.bundle)
        if vector.where is None and vector.expect["line"] and shared is not None:
            vector.where = describe(shared, vector.expect["line"])
        if bundle is not None:
            self.files[vector.bundle] = bundle
        if any(v.name == vector.name for v in self.vectors):
            raise ValueError(f"two vectors are named {vector.name}")
        self.vectors.append(vector)

    def case(
        self,
        name: str,
        draft: Draft | bytes,
        expect: dict[str, Any],
        rules: list[str],
        change: str,
        why: str,
        *,
        raw: Callable[[list[bytes]], object] | None = None,
        seal: bool = True,
        **options: Any,
    ) -> None:
        """A hand-built vector whose bundle is ``bundles/<name>.jsonl``."""
        vector = Vector(name, f"bundles/{name}.jsonl", expect, rules, change, why, **options)
        if isinstance(draft, bytes):
            data = draft
        else:
            data = draft.bytes(raw, seal=seal)
            if vector.where is None and expect["line"]:
                vector.where = describe(draft, expect["line"])
        self.add(vector, data)

    # --- the vectors ---------------------------------------------------------------------------

    def build(self) -> None:
        """Every section of cases/, in the order of the index."""
        real.real_bundles(self)
        lines.reading_lines(self)
        records.records_and_order(self)
        records.manifest_run_keys(self)
        journal.journal(self)
        journal.payloads_and_commands(self)
        signatures.signed_heads(self)
        signatures.keys_and_windows(self)
        signatures.signature_chain(self)
        heads.unsigned_heads(self)
        heads.witnesses(self)
        heads.end_of_journal(self)
        admission.policies(self)
        admission.admissions(self)
        admission.tickets(self)
        blobs.blobs(self)
        trailer.trailer(self)
        lines.long_lines(self)
        usage.usage_errors(self)

    # --- output --------------------------------------------------------------------------------

    def index(self) -> dict[str, Any]:
        return {
            "suite": SUITE,
            "version": SUITE_VERSION,
            "format": BUNDLE_FORMAT,
            "specification": "docs/formats.md, sections Audit bundle to Normative rules",
            "compare": ["exit_status", "valid", "problem", "first_broken_sequence", "line"],
            "vectors": [vector.as_json() for vector in self.vectors],
        }


def write(out: Path) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        suite = Suite(Path(workdir))
        suite.build()
    files = dict(suite.files)
    files["index.json"] = (json.dumps(suite.index(), indent=2, ensure_ascii=False) + "\n").encode()
    for name, data in sorted(files.items()):
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def differences(expected: Path, found: Path) -> list[str]:
    """Files that differ between two vector directories (missing, extra or changed)."""
    want = {p.relative_to(expected) for p in expected.rglob("*") if p.is_file()}
    have = {p.relative_to(found) for p in found.rglob("*") if p.is_file()}
    problems = [f"missing: {p}" for p in sorted(want - have)]
    problems += [f"not generated: {p}" for p in sorted(have - want)]
    for name in sorted(want & have):
        old, new = (found / name).read_bytes(), (expected / name).read_bytes()
        if old != new:
            problems.append(f"differs: {name}")
            if name.suffix == ".json" and len(old) < 2_000_000:
                diff = difflib.unified_diff(
                    old.decode().splitlines(), new.decode().splitlines(), lineterm="", n=1
                )
                problems += list(diff)[:40]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.audit.vectors.generate")
    parser.add_argument("--check", action="store_true", help="fail if the committed vectors differ")
    parser.add_argument("--out", type=Path, default=VECTORS, help="default: %(default)s")
    args = parser.parse_args(argv)
    if not args.check:
        if args.out.exists():
            for path in sorted(args.out.rglob("*"), reverse=True):
                path.unlink() if path.is_file() else path.rmdir()
        write(args.out)
        print(f"wrote {args.out}")
        return 0
    with tempfile.TemporaryDirectory() as fresh:
        write(Path(fresh))
        problems = differences(Path(fresh), args.out)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        print(
            "the vectors drifted from the generator: run 'make vectors' and commit", file=sys.stderr
        )
        return 1
    print(f"{args.out} is what the generator writes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
