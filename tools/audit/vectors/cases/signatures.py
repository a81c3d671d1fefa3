"""Signed heads and their signatures: placement and match with the entry (N12), the key that
signed (published, pinned, inside its window: N8, N9), the signature itself and the /2
signature chain ("Signed head": previous, unsigned_through, signed_at, across /1 signatures)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from vectors.drafts import GENESIS, Draft, Record, as_previous, key_id, key_record, sign
from vectors.material import A_SECOND_EARLIER, OTHER_DIGEST
from vectors.vector import Vector, broken, valid

if TYPE_CHECKING:
    from vectors.generate import Suite

V1 = "forge.continuity.signed-head/1"


def to_v1(head: Record, *, keep_format: bool) -> None:
    """Make a /2 signed head a /1 one: no previous or unsigned_through, and a format member
    naming /1 (``keep_format``) or none at all (also /1). Not re-signed here."""
    head.pop("previous", None)
    head.pop("unsigned_through", None)
    if keep_format:
        head["format"] = V1
    else:
        del head["format"]


def v1_statement_signed_as_v2(head: Record, keys: Mapping[str, Ed25519PrivateKey]) -> None:
    """Sign a /2 head over the six members of a /1 statement (which a /2 signature does not
    cover)."""
    v1 = {k: v for k, v in head.items() if k not in ("previous", "unsigned_through")}
    v1["format"] = V1
    sign(v1, keys)
    head["signature"] = v1["signature"]


def signed_heads(suite: Suite) -> None:
    s = suite.small
    d = s.copy()
    again = d.insert_after(d.head(2), json.loads(json.dumps(d.head(2))))
    suite.case(
        "signature-misplaced-second-head", d,
        broken("signature_misplaced", 2, d.line(again)), ["N12"],
        "signed head 2 written twice",
        "N12: a signed head following another of the same entry is signature_misplaced, "
        "named at the entry just read, 2",
    )  # fmt: skip
    d = s.copy()
    h3 = d.head(3)
    h3["sequence"] = 4
    sign(h3, suite.keys)
    suite.case(
        "signature-misplaced-wrong-sequence", d, broken("signature_misplaced", 3, d.line(h3)),
        ["N12"], "the signed head after entry 3 says sequence 4 (signed so)",
        "N12: a signed head whose sequence is not the entry just read's is misplaced, "
        "named at that entry, 3",
    )  # fmt: skip
    d = s.copy()
    h3 = d.head(3)
    h3["head_hash"] = d.entry(2)["hash"]
    sign(h3, suite.keys)
    suite.case(
        "signed-head-mismatch-hash", d, broken("signed_head_mismatch", 3, d.line(h3)),
        ["N12"], "signed head 3 signs entry 2's hash (validly signed)",
        "N12: a head_hash that differs from its entry's hash is signed_head_mismatch",
    )  # fmt: skip
    d = s.copy()
    h3 = d.head(3)
    h3["run_id"] = "run-other"
    sign(h3, suite.keys)
    suite.case(
        "signed-head-mismatch-run", d, broken("signed_head_mismatch", 3, d.line(h3)),
        ["N12"], "signed head 3 names run-other (validly signed)",
        "N12: a run_id that differs from its entry's is signed_head_mismatch",
    )  # fmt: skip
    d = s.copy()
    h3 = d.head(3)
    h3["head_hash"] = d.entry(2)["hash"]
    h3["key_id"] = key_id(suite.other_key)
    sign(h3, suite.keys)
    suite.case(
        "order-signed-head-mismatch-before-key", d,
        broken("signed_head_mismatch", 3, d.line(h3)), ["N12", "N13a"],
        "signed head 3 signs entry 2's hash with a key no one published",
        "N12: signed_head_mismatch is found before the key is looked at (not "
        "signing_key_unknown)",
    )  # fmt: skip
    d = s.copy()
    h3 = d.head(3)
    h3["signed_at"] = "2026-12-02T15:48:52Z"
    sign(h3, suite.keys)
    suite.case(
        "record-invalid-signed-at-form", d, broken("record_invalid", 3, d.line(h3)),
        ["N9", "N13a"], "signed head 3's signed_at has no fractional digits (signed so)",
        "N9: signed_at must be of the one timestamp form: record_invalid for a signed head",
    )  # fmt: skip
    d = s.copy()
    h3 = d.head(3)
    h3["signature"] = h3["signature"].rstrip("=")
    suite.case(
        "record-invalid-signature-base64", d, broken("record_invalid", 3, d.line(h3)),
        ["N5"], "signed head 3's signature without its base64 padding",
        "N5: base64 members are strict RFC 4648 with padding",
    )  # fmt: skip


def keys_and_windows(suite: Suite) -> None:
    s = suite.small
    d = s.copy()
    h3 = d.head(3)
    h3["key_id"] = key_id(suite.other_key)
    sign(h3, suite.keys)
    suite.case(
        "signing-key-unknown", d, broken("signing_key_unknown", 3, d.line(h3)), ["table"],
        "signed head 3 signed by a key the bundle does not publish",
        "its key is not published: signing_key_unknown at 3",
    )  # fmt: skip
    d = s.copy()
    d.first("signing_keys")["keys"].append(key_record(suite.other_key))
    h3 = d.head(3)
    h3["key_id"] = key_id(suite.other_key)
    sign(h3, suite.keys)
    suite.case(
        "signing-key-untrusted", d, broken("signing_key_untrusted", 3, d.line(h3)),
        ["table", "N8"],
        "the bundle also publishes another key; signed head 3 is signed by it",
        "published but not pinned: signing_key_untrusted at 3",
    )  # fmt: skip
    suite.add(Vector(
        "signing-key-untrusted-not-pinned", "bundles/real-small.jsonl",
        broken("signing_key_untrusted", 1, s.line(s.head(1))), ["table", "N8"],
        "the real small run; the only trusted key is another one",
        "the bundle's key is published, not pinned: signing_key_untrusted at the first "
        "signed head",
        trusted_keys=["keys/other.pub.pem"],
    ))  # fmt: skip
    suite.add(Vector(
        "signing-key-outside-window-pinned-retired", "bundles/real-small.jsonl",
        broken("signing_key_outside_window", 1, s.line(s.head(1))),
        ["Signing keys file", "table"],
        "the real small run; the pinned key was retired a second before the heads were "
        "signed",
        "a key vouches only when signed_at <= not_after: outside its window at the first "
        "signed head",
        trusted_keys=["keys/ledger-retired.signing-keys.json"],
    ))  # fmt: skip
    suite.add(Vector(
        "signing-key-outside-window-pinned-not-yet", "bundles/real-small.jsonl",
        broken("signing_key_outside_window", 1, s.line(s.head(1))),
        ["Signing keys file", "table"],
        "the real small run; the pinned key's not_before is a microsecond after signed_at",
        "not_before <= signed_at fails at the first signed head",
        trusted_keys=["keys/ledger-not-yet.signing-keys.json"],
    ))  # fmt: skip
    d = s.copy()
    d.first("signing_keys")["keys"][0]["not_after"] = A_SECOND_EARLIER
    suite.case(
        "signing-key-outside-window-published", d,
        broken("signing_key_outside_window", 1, d.line(d.head(1))), ["table"],
        "the bundle publishes the key retired a second before the heads were signed; the "
        "pinned key has no window",
        "a head lies inside every window stated for its key, pinned and published",
    )  # fmt: skip
    d = s.copy()
    h3 = d.head(3)
    signature = bytearray(base64.b64decode(h3["signature"]))
    signature[-1] ^= 1
    h3["signature"] = base64.b64encode(bytes(signature)).decode()
    suite.case(
        "signature-invalid", d, broken("signature_invalid", 3, d.line(h3)), ["table"],
        "one bit of signed head 3's signature flipped",
        "the signature does not verify over its statement: signature_invalid at 3",
    )  # fmt: skip


def signature_chain(suite: Suite) -> None:
    s = suite.small
    d = s.copy()
    h3 = d.head(3)
    h3["previous"]["signature_digest"] = OTHER_DIGEST
    suite.case(
        "order-signature-invalid-before-chain", d,
        broken("signature_invalid", 3, d.line(h3)), ["N13a"],
        "signed head 3's previous.signature_digest changed, not re-signed",
        "N13a: the signature is checked before the chain: signature_invalid, not "
        "signature_chain_broken",
    )  # fmt: skip
    d = s.copy()
    h3 = d.head(3)
    h3["format"] = "forge.continuity.signed-head/2"
    v1_statement_signed_as_v2(h3, suite.keys)
    suite.case(
        "signature-invalid-v1-statement", d, broken("signature_invalid", 3, d.line(h3)),
        ["Signed head"],
        "signed head 3 (format /2) signed over the six members of a /1 statement",
        "a /2 signature covers previous and unsigned_through too",
    )  # fmt: skip
    chain_cases: list[tuple[str, int, Callable[[Record, Draft], None], str, str]] = [
        ("previous", 3, lambda h, d: h.update(previous=as_previous(d.head(1))),
         "signed head 3's previous names signed head 1", "previous names the signed head "
         "before it"),
        ("first-previous", 1, lambda h, d: h.update(previous={
            "sequence": 0, "head_hash": GENESIS, "signature_digest": OTHER_DIGEST}),
         "signed head 1's previous is not null", "previous is null in the run's first "
         "signed head"),
        ("previous-null", 3, lambda h, d: h.update(previous=None),
         "signed head 3's previous is null", "only the first signed head has no previous"),
        ("unsigned-through", 3, lambda h, d: h.update(unsigned_through=1),
         "signed head 3 states unsigned_through 1 (the others 0)",
         "unsigned_through is the same along the chain"),
        ("signed-at-earlier", 3, lambda h, d: h.update(signed_at=A_SECOND_EARLIER),
         "signed head 3 was signed a second before signed head 2",
         "signed_at does not decrease along the /2 chain"),
    ]  # fmt: skip
    for label, sequence, change, what, rule in chain_cases:
        d = s.copy()
        head = d.head(sequence)
        change(head, d)
        sign(head, suite.keys)
        suite.case(
            f"signature-chain-broken-{label}", d,
            broken("signature_chain_broken", sequence, d.line(head)),
            ["Signed head", "table"], f"{what} (validly signed)",
            f"{rule}: signature_chain_broken at {sequence}",
        )  # fmt: skip
    across: list[tuple[str, dict[str, Any], str]] = [
        ("unsigned-through", {"unsigned_through": 1}, "states unsigned_through 1"),
        ("signed-at-earlier", {"signed_at": A_SECOND_EARLIER},
         "was signed a second before signed head 1"),
    ]  # fmt: skip
    for label, members, what in across:
        d = s.copy()
        to_v1(d.head(2), keep_format=True)
        d.reforge()
        head = d.head(3)
        head.update(members)
        sign(head, suite.keys)
        suite.case(
            f"signature-chain-broken-{label}-across-v1", d,
            broken("signature_chain_broken", 3, d.line(head)), ["Signed head", "table"],
            f"signed head 2 is a /1 signature; signed head 3 (/2, naming it as previous) "
            f"{what} (validly signed)",
            "unsigned_through is the same in every /2 signature of a run and signed_at never "
            "decreases along the /2 chain, whatever /1 signatures lie between: signed head 3 "
            "is compared with signed head 1, the /2 signature before it",
        )  # fmt: skip
    d = s.copy()
    to_v1(d.head(1), keep_format=False)
    to_v1(d.head(2), keep_format=True)
    d.reforge()
    suite.case(
        "valid-v1-signatures-before-chain", d, valid(), ["Signed head", "N13"],
        "signed heads 1 and 2 are /1 signatures (the first without a format member); signed "
        "head 3, the first /2, names signed head 2 as previous",
        "a /1 signature covers its six members and may precede /2 signatures, which name it "
        "as previous; a record without format is /1; every entry is covered",
    )  # fmt: skip
    d = s.copy()
    for head in d.all("signed_head"):
        to_v1(head, keep_format=False)
    d.reforge()
    suite.case(
        "valid-v1-signatures-only", d, valid(), ["Signed head", "N13"],
        "every signed head is a /1 signature", "every entry has a trusted signed head",
    )  # fmt: skip
