"""The material many vectors share, made once from the real runs: the compact admitted run,
the trusted-key files (``keys/``) and the heads files (``heads/``), with the fixed values they
and the cases use (a timestamp a second before the heads were signed, a digest of no history)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import timedelta

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from shared.continuity.canonical import sha256_digest
from shared.continuity.timeutil import to_text
from vectors.drafts import Draft, Record, encode, key_id, sign
from vectors.real_runs import NOW, NOW_TEXT, RealRuns
from vectors.vector import PINNED

A_SECOND_EARLIER = to_text(NOW - timedelta(seconds=1))
OTHER_DIGEST = sha256_digest(b"a history the ledger never wrote")


def compact(admitted: Draft) -> Draft:
    """The real admitted run with its three stored blobs (a checkpoint, a provider response,
    the derived checkpoint: 30 KB) replaced by short stand-ins, every digest renamed where it
    is quoted, and the bundle reforged: the same history, a few KB."""
    for blob in admitted.all("blob"):
        old = blob["digest"]
        content = json.dumps({"stand_in_for": old}, separators=(",", ":")).encode()
        admitted.rename_digest(old, sha256_digest(content))
        blob["content"] = base64.b64encode(content).decode("ascii")
    return admitted.reforge()


def key_files(real: RealRuns, other_key: Ed25519PrivateKey) -> dict[str, bytes]:
    """``keys/``: the exported signing-keys file, the same key as PEM and base64, another key,
    windows that exclude or just include the heads' signed_at, and a file holding no key."""
    pinned = real.signing_keys
    files: dict[str, bytes] = {}

    def keys_file(**window: str | None) -> bytes:
        document = json.loads(json.dumps(pinned))
        document["keys"][0].update(window)
        return (json.dumps(document, indent=2) + "\n").encode()

    files[PINNED] = keys_file()
    files["keys/ledger.pub.pem"] = real.public_pem
    files["keys/ledger.pub.b64"] = base64.b64encode(real.public_raw) + b"\n"
    files["keys/other.pub.pem"] = pem(other_key)
    files["keys/ledger-retired.signing-keys.json"] = keys_file(not_after=A_SECOND_EARLIER)
    after = to_text(NOW + timedelta(microseconds=1))
    files["keys/ledger-not-yet.signing-keys.json"] = keys_file(not_before=after)
    files["keys/ledger-window-exact.signing-keys.json"] = keys_file(
        not_before=NOW_TEXT, not_after=NOW_TEXT
    )
    files["keys/ledger-window-not-timestamp.signing-keys.json"] = keys_file(
        not_after="2026-12-06T00:00:00Z"
    )
    files["keys/not-a-key.txt"] = b"this file holds no public key\n"
    return files


def pem(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def head(
    sequence: int,
    head_hash: str,
    key: Ed25519PrivateKey,
    keys: Mapping[str, Ed25519PrivateKey],
) -> Record:
    """A heads-file line for the small run, signed by ``key``."""
    record: Record = {
        "type": "signed_head",
        "run_id": "run-small",
        "sequence": sequence,
        "head_hash": head_hash,
        "key_id": key_id(key),
        "signed_at": NOW_TEXT,
        "signature": "",
        "format": "forge.continuity.signed-head/2",
        "previous": None,
        "unsigned_through": 0,
    }
    sign(record, keys)
    return record


def heads_files(
    real: RealRuns,
    small: Draft,
    ledger_key: Ed25519PrivateKey,
    other_key: Ed25519PrivateKey,
    keys: Mapping[str, Ed25519PrivateKey],
) -> dict[str, bytes]:
    """``heads/``: the two passes a monitor recorded, a head forked at 3, one signed by a key no
    one pinned, two heads at one sequence, and a line that is no signed head."""
    files: dict[str, bytes] = {}
    files["heads/witnessed.jsonl"] = real.witnessed
    files["heads/witnessed-later.jsonl"] = real.witnessed_later
    forked = head(3, OTHER_DIGEST, ledger_key, keys)
    files["heads/forked-at-3.jsonl"] = encode(forked)
    files["heads/signed-by-other.jsonl"] = encode(head(5, small.entry(5)["hash"], other_key, keys))
    files["heads/two-at-one-sequence.jsonl"] = encode(
        head(3, small.entry(3)["hash"], ledger_key, keys)
    ) + encode(forked)
    files["heads/not-signed-heads.jsonl"] = encode(small.first("manifest"))
    return files
