"""The offline audit (issue 20 §3, ADR 0015): a bundle exported from a real run verifies with
nothing of ours running; a flipped byte, a swapped blob or a consistent rewrite from genesis is
named at its sequence."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, delete

from forge.continuity.v1 import ledger_pb2
from forge_audit.checks import key_id
from forge_audit.records import Broken
from forge_audit.verify import load_public_key, verify_file, verify_lines
from services.client.cli import main as cli_main
from services.ledger.domain.signing import HeadSigner, SignedHead
from services.ledger.schema import signed_heads
from shared.continuity.blob_references import blob_references
from tests.attacker import rewrite_from
from tests.audit.conftest import RealRun, export
from tests.support import as_database_owner

ROOT = Path(__file__).resolve().parents[2]
SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def records(bundle: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in bundle.read_bytes().splitlines()]


def broken(lines: list[bytes], **options: Any) -> Broken:
    """The first break; without pinned keys the bundle's own keys are trusted (these tests
    check internal consistency; the trust tests pin keys)."""
    options.setdefault("trust_bundle_keys", "trusted" not in options)
    with pytest.raises(Broken) as raised:
        verify_lines(lines, **options)
    return raised.value


def expected_sequences(bundle: Path) -> list[int | None]:
    """The sequence each line is about, computed here from the records (None: the manifest,
    run, keys and trailer lines, about no single entry)."""
    found: list[int | None] = []
    blob_first: dict[str, int] = {}
    revision_first: dict[int, int] = {}
    settlements: list[int] = []
    blobs = policies = admissions = 0
    for record in records(bundle):
        kind = record["type"]
        if kind == "entry":
            sequence = record["sequence"]
            found.append(sequence)
            payload = json.loads(record["payload_json"])
            for digest in blob_references(payload):  # the exporter's reading, not the verifier's
                blob_first.setdefault(digest, sequence)
            if isinstance(payload.get("policy_revision"), int):
                revision_first.setdefault(payload["policy_revision"], sequence)
            if record["kind"] == "migration_settlement":
                settlements.append(sequence)
        elif kind == "signed_head":
            found.append(record["sequence"])
        elif kind == "policy":
            found.append(revision_first[sorted(revision_first)[policies]])
            policies += 1
        elif kind == "admission":
            found.append(settlements[admissions])
            admissions += 1
        elif kind in ("blob", "blob_absent"):
            found.append(blob_first.get(record["digest"]))
            blobs += 1
        else:
            found.append(None)
    return found


# --- a real run verifies -----------------------------------------------------------------------


def test_a_real_run_exports_a_bundle_that_verifies_offline(
    real_run: RealRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = verify_file(real_run.bundle, dict([load_public_key(real_run.public_key)]))
    kinds = [r["kind"] for r in records(real_run.bundle) if r["type"] == "entry"]
    assert report.entries == len(kinds) and "migration_settlement" in kinds
    assert report.admissions == 1 and report.policies == 1
    assert report.commands == kinds.count("command_executed") == 12
    assert report.head_key_id and not report.trusted_from_bundle
    assert report.blobs >= 3  # the checkpoint, the consumed response, the derived checkpoint

    # The operator CLI writes the same bundle (a later export time aside).
    out = tmp_path / "cli.audit.jsonl"
    code = cli_main(
        [
            "--token",
            "reader-token",
            "--ledger",
            real_run.stack.ledger.target,
            "journal",
            "export",
            real_run.run_id,
            "--out",
            str(out),
        ],
        env={},
    )
    assert code == 0, capsys.readouterr()
    assert records(out)[1:-1] == records(real_run.bundle)[1:-1]

    # The verifier runs as its own program, given only its own package on the path.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "forge_audit.verify",
            "--json",
            "--trusted-key",
            str(real_run.public_key),
            str(out),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT / "tools" / "audit")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["valid"] is True


def test_the_run_exporting_nothing_is_a_usage_error(real_run: RealRun, tmp_path: Path) -> None:
    """A run that does not exist writes no file (not even a partial one)."""
    out = tmp_path / "missing.audit.jsonl"
    code = cli_main(
        [
            "--token",
            "reader-token",
            "--ledger",
            real_run.stack.ledger.target,
            "journal",
            "export",
            "no-such-run",
            "--out",
            str(out),
        ],
        env={},
    )
    assert code == 1
    assert list(tmp_path.glob("missing.audit.jsonl*")) == []


# --- tampering is named at its sequence --------------------------------------------------------


@SQLITE_ONLY
def test_every_flipped_byte_is_named_at_its_sequence(real_run: RealRun) -> None:
    lines = real_run.bundle.read_bytes().splitlines(keepends=True)
    about = expected_sequences(real_run.bundle)
    for index, line in enumerate(lines):
        # the first byte, the last (its LF), and bytes spread over the line
        positions = sorted({0, len(line) - 1, *range(7, len(line), max(len(line) // 9, 1))})
        for position in positions:
            flipped = bytearray(line)
            flipped[position] ^= 0x01
            found = broken([*lines[:index], bytes(flipped), *lines[index + 1 :]])
            where = f"line {index + 1} byte {position}: {found}"
            # Said of a value, not of the field's name ("does not hash to hash" misled).
            assert "hash to hash" not in str(found) and "to run_digest" not in str(found), where
            if about[index] is not None:
                assert found.sequence == about[index], where
            else:
                assert found.problem, where


@SQLITE_ONLY
def test_a_swapped_blob_is_named(real_run: RealRun) -> None:
    lines = real_run.bundle.read_bytes().splitlines(keepends=True)
    about = expected_sequences(real_run.bundle)
    blob_lines = [i for i, r in enumerate(records(real_run.bundle)) if r["type"] == "blob"]
    first, second = blob_lines[:2]
    # the content of one blob under the digest of another
    swapped = json.loads(lines[first])
    swapped["content"] = json.loads(lines[second])["content"]
    tampered = [*lines]
    tampered[first] = json.dumps(swapped, separators=(",", ":")).encode() + b"\n"
    found = broken(tampered)
    assert (found.sequence, found.problem) == (about[first], "blob_mismatch")
    # two blob records exchanged: the first one expected is named as left out
    exchanged = [*lines]
    exchanged[first], exchanged[second] = lines[second], lines[first]
    found = broken(exchanged)
    assert (found.sequence, found.problem) == (about[first], "blob_omitted")


@SQLITE_ONLY
def test_a_consistent_rewrite_from_genesis_is_refused_by_the_signed_head(
    real_run: RealRun, engine: Engine, tmp_path: Path
) -> None:
    """Someone with write access to the database but not the key rewrites the entry at
    sequence 2 and recomputes every later hash and link: the ledger's own verification cannot
    tell, the signed heads can."""
    rewrite_from(engine, real_run.run_id, 2)
    verification = real_run.stack.ledger_stub("reader-token").VerifyJournal(
        ledger_pb2.VerifyJournalRequest(run_id=real_run.run_id)
    )
    assert verification.valid  # a consistent rewrite: the chain itself verifies
    rewritten = export(real_run.stack, real_run.run_id, tmp_path / "rewritten.jsonl")
    pinned = dict([load_public_key(real_run.public_key)])
    with pytest.raises(Broken) as raised:
        verify_file(rewritten, pinned)
    assert (raised.value.sequence, raised.value.problem) == (2, "signed_head_mismatch")

    # Deleting the signatures too leaves every head unsigned: the first is named.
    with as_database_owner(engine) as connection:
        connection.execute(delete(signed_heads).where(signed_heads.c.run_id == real_run.run_id))
    unsigned = export(real_run.stack, real_run.run_id, tmp_path / "unsigned.jsonl")
    with pytest.raises(Broken) as raised:
        verify_file(unsigned, pinned)
    assert (raised.value.sequence, raised.value.problem) == (1, "head_unsigned")


@SQLITE_ONLY
def test_a_bundle_resigned_with_another_key_fails_against_the_trusted_key(
    real_run: RealRun,
) -> None:
    """Whoever rewrites the bundle itself can sign it with a key of their own and publish that
    key in it: only a key obtained out of band (--trusted-key) refuses it."""
    forger = HeadSigner.generate()
    lines = _resign(real_run.bundle.read_bytes().splitlines(keepends=True), forger)
    assert verify_lines(lines, trust_bundle_keys=True).head_key_id == forger.key_id
    trusted = dict([load_public_key(real_run.public_key)])
    found = broken(lines, trusted=trusted)
    assert (found.sequence, found.problem) == (1, "signing_key_untrusted")


# --- helpers that play the attacker ------------------------------------------------------------


def _resign(lines: list[bytes], forger: HeadSigner) -> list[bytes]:
    """Every signed head re-signed by ``forger``, its key published instead, the trailer
    recomputed: a bundle consistent with itself."""
    out: list[bytes] = []
    previous: SignedHead | None = None
    for raw in lines:
        record = json.loads(raw)
        if record["type"] == "signing_keys":
            public = forger.public_key
            record["keys"] = [
                {
                    "key_id": key_id(public),
                    "algorithm": "ed25519",
                    "public_key": base64.b64encode(public).decode(),
                }
            ]
        elif record["type"] == "signed_head":
            signed = forger.sign(
                record["run_id"],
                record["sequence"],
                record["head_hash"],
                record["signed_at"],
                None if previous is None else previous.as_previous(),
            )
            previous = signed
            record["key_id"] = signed.key_id
            record["signature"] = base64.b64encode(signed.signature).decode()
            record["previous"] = signed.previous and {
                "sequence": signed.previous.sequence,
                "head_hash": signed.previous.head_hash,
                "signature_digest": signed.previous.signature_digest,
            }
        elif record["type"] == "trailer":
            import hashlib

            record["bundle_digest"] = "sha256:" + hashlib.sha256(b"".join(out)).hexdigest()
        out.append(json.dumps(record, separators=(",", ":")).encode() + b"\n")
    return out
