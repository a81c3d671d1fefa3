"""The demo's last step: a monitor watches the signed heads, the auditor pins the published
keys, and each run is exported as an audit bundle and verified offline against both by
``forge-continuity-verify``, a program that imports nothing of the services (ADR 0015)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from services.client import ContinuityClient, HeadsFile

ROOT = Path(__file__).resolve().parents[2]


def _verify(bundle: Path, keys: Path, heads: Path) -> tuple[int, dict[str, object]]:
    """The verifier as its own program, with only its own package on the path."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "forge_audit.verify",
            "--json",
            "--trusted-key",
            str(keys),
            "--known-heads",
            str(heads),
            str(bundle),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT / "tools" / "audit")},
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, json.loads(done.stdout or "{}")


def audit_story(
    targets: Mapping[str, str],
    run_ids: Sequence[str],
    tokens: Mapping[str, str],
    check: Callable[[bool, str], None],
    step: Callable[[str], None],
) -> None:
    """Every story's run exported and verified; then one byte of the first flipped."""
    step(
        "An offline audit: watch the signed heads, pin the keys, export each run's bundle and "
        "verify it with nothing running"
    )
    with (
        ContinuityClient(
            tokens["reader"],
            ledger_target=targets["ledger"],
            candidate_target=targets["candidate"],
            admission_target=targets["admission"],
        ) as reader,
        tempfile.TemporaryDirectory(prefix="forge-audit-") as workdir,
    ):
        document = reader.signing_keys_document()
        keys = document["keys"]
        check(bool(keys), f"the ledger publishes its head-signing key {keys[0]['key_id'][:19]}…")
        trusted = Path(workdir) / "signing-keys.json"
        trusted.write_text(json.dumps(document, indent=2) + "\n")
        heads = Path(workdir) / "heads.jsonl"
        watched = reader.watch_heads_once(HeadsFile(heads))
        check(
            not watched.alarms and watched.recorded > 0,
            f"a monitor witnessed {watched.recorded} signed heads (heads watch), no alarm",
        )
        for run_id in run_ids:
            bundle = Path(workdir) / f"{run_id}.audit.jsonl"
            counts = reader.export_journal(run_id, bundle).counts
            code, result = _verify(bundle, trusted, heads)
            check(
                code == 0 and result.get("valid") is True,
                f"{run_id}: {counts['entries']} entries, {counts['signed_heads']} signed heads, "
                f"{counts['blobs']} blobs, {counts['admissions']} admission(s) verify offline "
                f"with pinned keys, extending {result.get('witnessed_heads')} witnessed head(s)"
                + ("" if code == 0 else f" (verifier exit {code}: {result})"),
            )
        bundle = Path(workdir) / f"{run_ids[0]}.audit.jsonl"
        lines = bundle.read_bytes().splitlines(keepends=True)
        index = next(i for i, line in enumerate(lines) if b'"sequence":3,' in line)
        tampered = bytearray(lines[index])
        tampered[tampered.index(b'"actor":"') + len(b'"actor":"')] ^= 0x01  # one letter
        lines[index] = bytes(tampered)
        bundle.write_bytes(b"".join(lines))
        code, result = _verify(bundle, trusted, heads)
        check(
            code == 1 and result.get("first_broken_sequence") == 3,
            f"one flipped byte in entry 3 is named: {result.get('problem')} at sequence 3",
        )
