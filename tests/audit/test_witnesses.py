"""Witnesses outside the database (issue 43 §1-2, ADR 0015): every head carries a trusted
signature, the signatures chain, keys vouch only inside their windows, a monitor's heads file
convicts a rollback or a fork, and the verifier trusts a bundle's own keys only when told."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from forge.continuity.v1 import common_pb2, ledger_pb2
from forge_audit.jcs import canonical, digest_of
from forge_audit.records import Broken
from forge_audit.verify import load_public_key, load_trusted_keys, verify_file, verify_lines
from services.client.cli import main as cli_main
from services.ledger.domain.signing import HeadSigner, SignedHead
from tests.audit.conftest import RealRun, export

ROOT = Path(__file__).resolve().parents[2]
SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def lines_of(bundle: Path) -> list[bytes]:
    return bundle.read_bytes().splitlines(keepends=True)


def rewritten(lines: list[bytes], change: Any) -> list[bytes]:
    """Apply ``change(record) -> record | None`` (None drops the line) and recompute counts and
    the trailer: a bundle consistent with itself apart from the change."""
    out: list[bytes] = []
    counts = dict.fromkeys(
        ("entries", "signed_heads", "policies", "admissions", "blobs", "blobs_absent"), 0
    )
    plural = {"entry": "entries", "signed_head": "signed_heads", "policy": "policies",
              "admission": "admissions", "admission_absent": "admissions", "blob": "blobs",
              "blob_absent": "blobs_absent"}  # fmt: skip
    for raw in lines:
        record = json.loads(raw)
        if record["type"] == "trailer":
            record["counts"] = counts
            record["bundle_digest"] = "sha256:" + hashlib.sha256(b"".join(out)).hexdigest()
        else:
            record = change(record)
            if record is None:
                continue
            if record["type"] in plural:
                counts[plural[record["type"]]] += 1
        out.append(json.dumps(record, separators=(",", ":")).encode() + b"\n")
    return out


def broken(lines: list[bytes], **options: Any) -> Broken:
    with pytest.raises(Broken) as raised:
        verify_lines(lines, **options)
    return raised.value


def cli(real_run: RealRun, *arguments: str) -> int:
    return cli_main(
        ["--token", "reader-token", "--ledger", real_run.stack.ledger.target, *arguments], env={}
    )


def verify_program(*arguments: str) -> subprocess.CompletedProcess[str]:
    """forge-continuity-verify as its own program, given only its own package."""
    return subprocess.run(
        [sys.executable, "-m", "forge_audit.verify", *arguments],
        env={**os.environ, "PYTHONPATH": str(ROOT / "tools" / "audit")},
        capture_output=True,
        text=True,
        check=False,
    )


@SQLITE_ONLY
def test_a_head_whose_signature_is_missing_is_named(real_run: RealRun) -> None:
    """Before chaining only the last head needed a signature: a rewrite of a middle entry whose
    signature was dropped went unseen. Now every head needs one."""
    pinned = dict([load_public_key(real_run.public_key)])
    lines = lines_of(real_run.bundle)
    signed = [json.loads(raw)["sequence"] for raw in lines if b'"signed_head"' in raw[:30]]
    middle = signed[len(signed) // 2]
    dropped = rewritten(
        lines,
        lambda r: None if r["type"] == "signed_head" and r["sequence"] == middle else r,
    )
    found = broken(dropped, trusted=pinned)
    # the next signature names the dropped one as its previous
    assert (found.sequence, found.problem) in {
        (middle, "head_unsigned"),
        (signed[signed.index(middle) + 1], "signature_chain_broken"),
    }


@SQLITE_ONLY
def test_signatures_that_do_not_chain_are_named(real_run: RealRun) -> None:
    """A forger who re-signs each head on its own (no chain) is caught even when the bundle's
    own keys are trusted."""
    forger = HeadSigner.generate()
    keys = [{"key_id": forger.key_id, "algorithm": "ed25519",
             "public_key": base64.b64encode(forger.public_key).decode()}]  # fmt: skip

    def resign(record: dict[str, Any]) -> dict[str, Any]:
        if record["type"] == "signing_keys":
            record["keys"] = keys
        if record["type"] == "signed_head":
            signed = forger.sign(
                record["run_id"], record["sequence"], record["head_hash"], record["signed_at"]
            )
            record.update(_signed_members(signed))
        return record

    lines = rewritten(lines_of(real_run.bundle), resign)
    found = broken(lines, trust_bundle_keys=True)
    assert found.problem == "signature_chain_broken"


def _signed_members(signed: SignedHead) -> dict[str, Any]:
    previous = signed.previous
    return {
        "key_id": signed.key_id,
        "signature": base64.b64encode(signed.signature).decode(),
        "previous": None
        if previous is None
        else {
            "sequence": previous.sequence,
            "head_hash": previous.head_hash,
            "signature_digest": previous.signature_digest,
        },
        "unsigned_through": signed.unsigned_through,
    }


@SQLITE_ONLY
def test_a_key_does_not_vouch_outside_its_window(real_run: RealRun, tmp_path: Path) -> None:
    assert cli(real_run, "signing-keys", "export", "--out", str(tmp_path / "keys.json")) == 0
    keys = json.loads((tmp_path / "keys.json").read_text())
    assert keys["format"] == "forge.continuity.signing-keys/1"
    assert verify_file(real_run.bundle, load_trusted_keys(tmp_path / "keys.json")).entries > 0
    # the same key, retired before the run was signed
    keys["keys"][0]["not_after"] = "2020-01-01T00:00:00.000000Z"
    (tmp_path / "retired.json").write_text(json.dumps(keys))
    with pytest.raises(Broken) as raised:
        verify_file(real_run.bundle, load_trusted_keys(tmp_path / "retired.json"))
    assert (raised.value.sequence, raised.value.problem) == (1, "signing_key_outside_window")


@SQLITE_ONLY
def test_a_bundle_cut_back_to_an_earlier_head_is_a_rollback(
    real_run: RealRun, tmp_path: Path
) -> None:
    """The bundle exported earlier verifies alone; once a monitor witnessed a later head it is a
    rollback (the truncation attack: an earlier, genuinely signed head)."""
    heads, keys = tmp_path / "heads.jsonl", tmp_path / "keys.json"
    assert cli(real_run, "heads", "watch", "--once", "--out", str(heads)) == 0
    assert cli(real_run, "signing-keys", "export", "--out", str(keys)) == 0
    # the journal grows after the export
    ledger = real_run.stack.ledger_stub()
    head = ledger.GetRun(ledger_pb2.GetRunRequest(run_id=real_run.run_id)).head.hash
    ledger.AppendJournalEntry(
        ledger_pb2.AppendJournalEntryRequest(
            run_id=real_run.run_id,
            expected_head_hash=head,
            kind=common_pb2.JOURNAL_ENTRY_KIND_TOOL_INTENT,
            payload_json=json.dumps({"call_id": "after-the-export"}),
        )
    )
    assert cli(real_run, "heads", "watch", "--once", "--out", str(heads)) == 0
    witnessed = [json.loads(line) for line in heads.read_text().splitlines()]
    assert [h["sequence"] for h in witnessed][-1] > json.loads(lines_of(real_run.bundle)[0])[
        "head"
    ]["sequence"]

    done = verify_program(
        "--json", "--trusted-key", str(keys), "--known-heads", str(heads), str(real_run.bundle)
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert json.loads(done.stdout)["problem"] == "rollback"
    # a fresh export extends every witnessed head
    fresh = export(real_run.stack, real_run.run_id, tmp_path / "fresh.jsonl")
    done = verify_program("--trusted-key", str(keys), "--known-heads", str(heads), str(fresh))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "witnessed      2 heads a monitor saw" in done.stdout


@SQLITE_ONLY
def test_a_rewritten_bundle_diverging_from_a_witnessed_head_is_a_fork(
    real_run: RealRun, tmp_path: Path
) -> None:
    """A bundle rewritten from sequence 2 and re-signed, chain and all, by the forger's key is
    consistent with itself; the head a monitor witnessed convicts it."""
    heads = tmp_path / "heads.jsonl"
    assert cli(real_run, "heads", "watch", "--once", "--out", str(heads)) == 0
    forger = HeadSigner.generate()
    forger_keys = [{"key_id": forger.key_id, "algorithm": "ed25519",
                    "public_key": base64.b64encode(forger.public_key).decode()}]  # fmt: skip
    state: dict[str, Any] = {"prev": None, "signed": None, "settled_at": None}

    def forge(record: dict[str, Any]) -> dict[str, Any]:
        if record["type"] == "signing_keys":
            record["keys"] = forger_keys
        elif record["type"] == "entry":
            payload = json.loads(record["payload_json"])
            if record["sequence"] == 2:
                payload["forged"] = True
            record["payload_json"] = canonical(payload).decode()
            if state["prev"] is not None:
                record["prev_hash"] = state["prev"]
            members = ("run_id", "sequence", "kind", "prev_hash", "actor", "recorded_at")
            envelope = {name: record[name] for name in members}
            record["hash"] = digest_of({**envelope, "payload": payload})
            if record["kind"] == "migration_settlement":
                state["settled_at"] = record["prev_hash"]
            state["prev"] = record["hash"]
        elif record["type"] == "admission":
            record["digests"]["journal_digest"] = state["settled_at"]
        elif record["type"] == "signed_head":
            before = state["signed"]
            signed = forger.sign(
                record["run_id"], record["sequence"], state["prev"], record["signed_at"],
                None if before is None else before.as_previous(),
            )  # fmt: skip
            state["signed"] = signed
            record["head_hash"] = state["prev"]
            record.update(_signed_members(signed))
        elif record["type"] == "manifest":
            return record
        return record

    lines = rewritten(lines_of(real_run.bundle), forge)
    # the manifest names the forged head too
    manifest = json.loads(lines[0])
    manifest["head"]["hash"] = state["prev"]
    lines = rewritten([json.dumps(manifest).encode() + b"\n", *lines[1:]], lambda r: r)
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(b"".join(lines))
    alone = verify_program("--trust-bundle-keys", str(forged))
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert "ONLY INTERNAL CONSISTENCY" in alone.stdout
    witnessed = verify_program(
        "--json", "--trust-bundle-keys", "--known-heads", str(heads), str(forged)
    )
    assert witnessed.returncode == 1, witnessed.stdout + witnessed.stderr
    assert json.loads(witnessed.stdout)["problem"] == "fork"


@SQLITE_ONLY
def test_without_a_trusted_key_the_verifier_refuses_unless_told(real_run: RealRun) -> None:
    done = verify_program(str(real_run.bundle))
    assert done.returncode == 2
    assert "--trusted-key" in done.stderr and "--trust-bundle-keys" in done.stderr
    pinned = verify_program("--trusted-key", str(real_run.public_key), str(real_run.bundle))
    assert pinned.returncode == 0 and "every signed head by keys given" in pinned.stdout
