"""The real bundles (``source: real``): the four runs exported as they are, the compact
admitted run every admission vector edits, and the small run under other ways of trusting its
key (PEM, raw base64, ``--trust-bundle-keys``, a window that just includes the heads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vectors.vector import Vector, valid

if TYPE_CHECKING:
    from vectors.generate import Suite


def real_bundles(suite: Suite) -> None:
    real = suite.real.bundles
    small = "bundles/real-small.jsonl"
    suite.files[small] = real["run-small"]
    suite.drafts[small] = suite.small
    suite.files["bundles/real-admitted.jsonl"] = real["run-admitted"]
    suite.files["bundles/real-empty.jsonl"] = real["run-empty"]
    suite.files["bundles/real-presigned.jsonl"] = real["run-presigned"]
    why_real = (
        "a run written through the services and exported by the ledger's exporter: every "
        "check of the table holds"
    )
    suite.add(Vector(
        "valid-real-small", small, valid(), ["table", "N20", "N21"],
        "none: five entries, each head signed, two stored blobs and one the ledger does not "
        "store (blob_absent, reported)", why_real, source="real",
    ))  # fmt: skip
    suite.add(Vector(
        "valid-real-admitted", "bundles/real-admitted.jsonl", valid(),
        ["table", "N14", "N17", "N18", "N19"],
        "none: a held run admitted by an operator (settlement and claim signed once, at the "
        "claim), claimed by a worker that charged a command, and completed", why_real,
        source="real",
    ))  # fmt: skip
    suite.add(Vector(
        "valid-real-empty", "bundles/real-empty.jsonl", valid(), ["N6"],
        "none: a run created with no entries",
        "N6: head {0, genesis}, no entry or signed_head records, verifies without any "
        "signature", source="real",
    ))  # fmt: skip
    suite.add(Vector(
        "valid-real-presigned", "bundles/real-presigned.jsonl", valid(), ["N13"],
        "none: entries 1-2 written by a ledger without a key, declared a pre-signing prefix "
        "by an operator, entries 3-4 signed (unsigned_through 2)",
        "N13: the first /2 signature states unsigned_through 2, so the unsigned entries 1 and "
        "2 are exempt", source="real",
    ))  # fmt: skip
    suite.add(Vector(
        "valid-admitted-compact", "bundles/admitted-compact.jsonl", valid(),
        ["table", "N14", "N19"],
        "the real admitted run with its three stored blobs replaced by short stand-ins "
        "(every digest renamed where it is quoted, hashes, signatures and trailer "
        "recomputed): the base of the admission vectors",
        "a consistent rewrite re-signed with the pinned test key breaks no rule",
    ), suite.admitted.bytes())  # fmt: skip
    suite.add(Vector(
        "valid-pinned-pem-key", small, valid(), ["N8"],
        "the real small run; the trusted key is a PEM PUBLIC KEY",
        "N8: a PEM Ed25519 public key is a trusted-key file (no window)",
        trusted_keys=["keys/ledger.pub.pem"], source="real",
    ))  # fmt: skip
    suite.add(Vector(
        "valid-pinned-raw-key", small, valid(), ["N8"],
        "the real small run; the trusted key is the base64 of its 32 raw bytes",
        "N8: the base64 of the 32 raw bytes is a trusted-key file (no window)",
        trusted_keys=["keys/ledger.pub.b64"], source="real",
    ))  # fmt: skip
    suite.add(Vector(
        "valid-trust-bundle-keys", small, valid(), ["N8"],
        "the real small run, no trusted key, --trust-bundle-keys",
        "N8: the user asked to trust the bundle's own keys; the verdict is the same (the "
        "report says only internal consistency was checked)",
        trusted_keys=[], trust_bundle_keys=True, source="real",
    ))  # fmt: skip
    suite.add(Vector(
        "valid-key-window-inclusive", small, valid(), ["Signing keys file", "N9"],
        "the real small run; the pinned key's window is not_before = not_after = the "
        "signed_at of every head",
        "a key vouches when not_before <= signed_at <= not_after: both bounds are inclusive",
        trusted_keys=["keys/ledger-window-exact.signing-keys.json"], source="real",
    ))  # fmt: skip
