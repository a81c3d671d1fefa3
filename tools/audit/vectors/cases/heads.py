"""Which entries signed heads cover (N13: a missing signature, the declared pre-signing
prefix, ``--allow-unsigned-head``), the heads a monitor witnessed ("Heads file and the head
feed": rollback, fork, a forgery trusting its own keys) and where the journal ends (N15: the
manifest's head)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vectors.cases.signatures import to_v1
from vectors.drafts import Draft, key_id, key_record
from vectors.material import OTHER_DIGEST
from vectors.vector import Vector, broken, valid

if TYPE_CHECKING:
    from vectors.generate import Suite


def unsigned_heads(suite: Suite) -> None:
    s = suite.small
    d = s.copy()
    d.remove(d.head(3))
    d.reforge()
    suite.case(
        "head-unsigned-middle", d, broken("head_unsigned", 3, d.line(d.entry(4))),
        ["N13", "N13a"], "signed head 3 removed (the chain re-signed around it)",
        "N13: entry 3 is covered by no signed head; found when entry 4 arrives (N13a: "
        "head_unsigned of the entry before it), named at 3 on entry 4's line",
    )  # fmt: skip
    d = s.copy()
    d.remove(d.head(5))
    suite.case(
        "head-unsigned-last", d, broken("head_unsigned", 5, d.after_journal()),
        ["N13", "N2"], "the last signed head removed",
        "N13: entry 5 is uncovered, found at the end of the journal (N2: on the line of the "
        "first record after it)",
    )  # fmt: skip
    d = s.copy()
    d.remove(d.head(1), d.head(2))
    d.reforge()
    suite.case(
        "head-unsigned-before-first-v2", d, broken("head_unsigned", 1, d.line(d.head(3))),
        ["N13"], "signed heads 1 and 2 removed; head 3 (now the first) states "
        "unsigned_through 0",
        "N13: uncovered entries before the first /2 signature are remembered; that "
        "signature names the first uncovered entry beyond unsigned_through (0): 1, on its "
        "own line",
    )  # fmt: skip
    d = s.copy()
    d.remove(d.head(1), d.head(2))
    for head in d.all("signed_head"):
        head["unsigned_through"] = 1
    d.reforge()
    suite.case(
        "head-unsigned-beyond-declared-prefix", d,
        broken("head_unsigned", 2, d.line(d.head(3))), ["N13"],
        "signed heads 1 and 2 removed; every signature states unsigned_through 1",
        "N13: entry 1 is inside the declared prefix; entry 2 is the first uncovered entry "
        "beyond it, named when the first /2 signature states the prefix",
    )  # fmt: skip
    d = s.copy()
    d.remove(d.head(1), d.head(2))
    for head in d.all("signed_head"):
        head["unsigned_through"] = 2
    d.reforge()
    suite.case(
        "valid-declared-prefix", d, valid(), ["N13"],
        "signed heads 1 and 2 removed; every signature states unsigned_through 2",
        "N13: entries 1..unsigned_through may lack a signature",
    )  # fmt: skip
    d = s.copy()
    d.remove(*d.all("signed_head"))
    suite.case(
        "head-unsigned-no-signature", d, broken("head_unsigned", 1, d.after_journal()),
        ["N13", "N2"], "every signed head removed",
        "N13: with no /2 signature, unsigned_through is taken as 0 at the end of the "
        "journal: the first uncovered entry, 1, on the line after the journal",
    )  # fmt: skip
    d = s.copy()
    for head in d.all("signed_head"):
        to_v1(head, keep_format=False)
    d.remove(d.head(3))
    d.reforge()
    suite.case(
        "head-unsigned-v1-only", d, broken("head_unsigned", 3, d.after_journal()), ["N13"],
        "every signed head a /1 signature, and signed head 3 removed",
        "N13: no /2 signature states a prefix, so the uncovered entry 3 is named at the end "
        "of the journal",
    )  # fmt: skip
    d = s.copy()
    d.remove(d.head(3), d.head(4))
    d.reforge()
    suite.case(
        "valid-allow-unsigned-head", d, valid(), ["N13", "table"],
        "signed heads 3 and 4 removed; --allow-unsigned-head",
        "with --allow-unsigned-head uncovered entries are counted instead of a break",
        allow_unsigned_head=True,
    )  # fmt: skip
    d = s.copy()
    d.remove(d.head(2))
    d.reforge()
    d.entry(3)["actor"] = "mallory"
    suite.case(
        "order-hash-mismatch-before-head-unsigned", d,
        broken("hash_mismatch", 3, d.line(d.entry(3))), ["N13a"],
        "signed head 2 removed, and entry 3's actor changed with its hash kept",
        "N13a: this entry's hash_mismatch is checked before head_unsigned of the entry "
        "before it",
    )  # fmt: skip


def witnesses(suite: Suite) -> None:
    s = suite.small
    small = "bundles/real-small.jsonl"
    suite.add(Vector(
        "valid-witnessed", small, valid(), ["Heads file and the head feed"],
        "the real small run and the heads a monitor recorded (heads watch) when it was "
        "exported, with other runs' heads",
        "the bundle extends every head witnessed for its run; other runs' heads are ignored",
        known_heads="heads/witnessed.jsonl", source="real",
    ))  # fmt: skip
    suite.add(Vector(
        "rollback", small, broken("rollback", 7, s.after_journal()),
        ["Heads file and the head feed", "N2"],
        "the real small run exported at head 5; the monitor witnessed head 7 after the run "
        "grew",
        "the journal does not reach the newest witnessed sequence: rollback named at 7, "
        "found at the end of the journal", known_heads="heads/witnessed-later.jsonl",
    ))  # fmt: skip
    suite.add(Vector(
        "fork", small, broken("fork", 3, s.line(s.entry(3))),
        ["Heads file and the head feed", "N13a"],
        "the real small run; the heads file holds a head at 3 with another hash (signed by "
        "the pinned key)",
        "the entry at a witnessed sequence has another hash: fork named at 3, on entry 3's "
        "line", known_heads="heads/forked-at-3.jsonl",
    ))  # fmt: skip
    forged = s.copy()
    forged.set_payload(forged.entry(2), {**forged.payload(forged.entry(2)), "forged": True})
    forged.first("signing_keys")["keys"] = [key_record(suite.other_key)]
    for head in forged.all("signed_head"):
        head["key_id"] = key_id(suite.other_key)
    forged.reforge()
    name = "bundles/forged-small.jsonl"
    suite.drafts[name] = forged
    suite.add(Vector(
        "valid-forged-bundle-trusting-its-own-keys", name, valid(), ["N8"],
        "entry 2 rewritten and the whole bundle re-signed, chain and all, by another key it "
        "publishes; --trust-bundle-keys",
        "N8: trusting the bundle's own keys checks internal consistency only; a consistent "
        "forgery passes",
        trusted_keys=[], trust_bundle_keys=True,
    ), forged.bytes())  # fmt: skip
    suite.add(Vector(
        "signing-key-untrusted-forged-bundle", name,
        broken("signing_key_untrusted", 1, forged.line(forged.head(1))), ["N8", "table"],
        "the same forgery, against the pinned key",
        "the forger's key is published by the bundle, not pinned: signing_key_untrusted at "
        "the first signed head",
    ))  # fmt: skip
    suite.add(Vector(
        "fork-forged-bundle-trusting-its-own-keys", name,
        broken("fork", 5, forged.line(forged.entry(5))), ["Heads file and the head feed"],
        "the same forgery with --trust-bundle-keys and the heads the monitor recorded",
        "without --trusted-key the heads file is taken as it is; the witnessed head 5 "
        "differs from the forged entry 5: fork",
        trusted_keys=[], trust_bundle_keys=True, known_heads="heads/witnessed.jsonl",
    ))  # fmt: skip
    d = s.copy()
    d.remove(d.head(2))
    d.reforge()
    suite.case(
        "order-head-unsigned-before-fork", d,
        broken("head_unsigned", 2, d.line(d.entry(3))), ["N13a"],
        "signed head 2 removed (re-signed around it); a head at 3 with another hash "
        "witnessed",
        "N13a: on entry 3, head_unsigned of the entry before it comes before fork at this "
        "entry", known_heads="heads/forked-at-3.jsonl",
    )  # fmt: skip
    d = s.copy()
    d.set_payload(d.entry(3), {**d.payload(d.entry(3)), "command_id": 7})
    d.reforge()
    suite.case(
        "order-fork-before-command-ledger", d, broken("fork", 3, d.line(d.entry(3))),
        ["N13a", "N16"],
        "entry 3's command_id is 7 (reforged); a head at 3 with another hash witnessed",
        "N13a: fork at this entry comes before the command ledger at this entry",
        known_heads="heads/forked-at-3.jsonl",
    )  # fmt: skip
    d = s.copy()
    d.remove(d.head(5))
    suite.case(
        "order-head-unsigned-before-rollback", d,
        broken("head_unsigned", 5, d.after_journal()), ["N15"],
        "the last signed head removed; head 7 witnessed",
        "N15: head_unsigned is found before rollback at the end of the journal",
        known_heads="heads/witnessed-later.jsonl",
    )  # fmt: skip


def end_of_journal(suite: Suite) -> None:
    s = suite.small
    d = s.copy()
    d.first("manifest")["head"]["sequence"] = 6
    suite.case(
        "head-mismatch-sequence-beyond", d, broken("head_mismatch", 6, d.after_journal()),
        ["N15", "N2"], "the manifest's head says sequence 6; the journal ends at 5",
        "N15: named at the larger of the last entry's sequence and the head's, 6, found on "
        "the first line after the journal",
    )  # fmt: skip
    d = s.copy()
    d.first("manifest")["head"] = {"sequence": 3, "hash": d.entry(3)["hash"]}
    suite.case(
        "head-mismatch-sequence-before", d, broken("head_mismatch", 5, d.after_journal()),
        ["N15"], "the manifest's head is entry 3; the journal goes on to 5",
        "N15: the larger of 5 and 3",
    )  # fmt: skip
    d = s.copy()
    d.first("manifest")["head"]["hash"] = d.entry(4)["hash"]
    suite.case(
        "head-mismatch-hash", d, broken("head_mismatch", 5, d.after_journal()), ["N15"],
        "the manifest's head names sequence 5 with entry 4's hash",
        "N15: the journal does not end at the manifest's head (by hash)",
    )  # fmt: skip
    e = Draft.of(suite.real.bundles["run-empty"], suite.keys)
    e.first("manifest")["head"]["hash"] = OTHER_DIGEST
    suite.case(
        "head-mismatch-empty-journal", e,
        broken("head_mismatch", 0, e.after(("signing_keys",))), ["N6", "N15"],
        "the empty run's manifest head is sequence 0 with a hash that is not genesis",
        "N6: an empty journal's head is {0, genesis}; named at 0 on the first line after "
        "the (empty) journal",
    )  # fmt: skip
