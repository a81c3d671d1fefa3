"""The journal's entries: sequence gaps, run and link mismatches, entry hashes (N10, N13a),
canonical payloads ("Primitives"), kinds no version knows (N11) and the command ledger (N16:
receipts, double charges, the command limit)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from shared.continuity.canonical import canonical_text, digest_of
from vectors.cases.edits import nested_arrays, replace_in
from vectors.drafts import envelope_hash
from vectors.vector import broken, valid

if TYPE_CHECKING:
    from vectors.generate import Suite


def journal(suite: Suite) -> None:
    s = suite.small
    d = s.copy()
    d.remove(d.entry(3), d.head(3))
    suite.case(
        "sequence-gap-missing-entry", d, broken("sequence_gap", 3, d.line(d.entry(4))),
        ["N10"], "entry 3 and its signed head removed",
        "N10: the entry read after entry 2 says 4; the gap is named at the sequence "
        "expected, 3, on that entry's line",
    )  # fmt: skip
    d = s.copy()
    again = d.insert_after(d.head(3), json.loads(json.dumps(d.entry(3))))
    suite.case(
        "sequence-gap-repeated-entry", d, broken("sequence_gap", 4, d.line(again)),
        ["N10"], "entry 3 written again after its signed head",
        "N10: 4 is expected and 3 is found: sequence_gap named at 4",
    )  # fmt: skip
    d = s.copy()
    at = d.index(d.entry(3))
    suite.case(
        "record-invalid-entry-sequence-not-integer", d,
        broken("record_invalid", 3, d.line(d.entry(3))), ["N5"],
        "entry 3's sequence written 3.0 (its hash still matches: RFC 8785 writes 3.0 as 3)",
        "N5: 3.0 is not an integer; an entry is named at its own (the expected) sequence",
        raw=lambda lines: replace_in(lines, at, b'"sequence":3,', b'"sequence":3.0,'),
    )  # fmt: skip
    d = s.copy()
    d.entry(3)["run_id"] = "run-other"
    d.reforge()
    suite.case(
        "run-mismatch-entry", d, broken("run_mismatch", 3, d.line(d.entry(3))), ["table"],
        "entry 3 names run-other (hash, chain and signatures recomputed)",
        "each entry names the manifest's run: run_mismatch at 3",
    )  # fmt: skip
    d = s.copy()
    e3 = d.entry(3)
    e3["prev_hash"] = d.entry(1)["hash"]
    e3["hash"] = envelope_hash(e3)
    suite.case(
        "link-mismatch", d, broken("link_mismatch", 3, d.line(e3)), ["table"],
        "entry 3's prev_hash is entry 1's hash (its own hash recomputed over it)",
        "prev_hash must be the previous entry's hash: link_mismatch at 3",
    )  # fmt: skip
    d = s.copy()
    e3 = d.entry(3)
    e3["run_id"] = "run-other"
    e3["prev_hash"] = d.entry(1)["hash"]
    suite.case(
        "order-run-mismatch-before-link-mismatch", d,
        broken("run_mismatch", 3, d.line(e3)), ["N13a"],
        "entry 3 names run-other and links to entry 1; its hash is stale too",
        "N13a: an entry's checks run sequence_gap, run_mismatch, link_mismatch, "
        "payload_not_canonical, hash_mismatch: the first failing is run_mismatch",
    )  # fmt: skip


def payloads_and_commands(suite: Suite) -> None:
    s = suite.small
    payload3 = s.entry(3)["payload_json"]
    digest3 = json.loads(payload3)["command_digest"]
    not_canonical = {
        "whitespace": (json.dumps(json.loads(payload3)), "written with spaces after ':' "
                       "and ','"),
        "member-order": ('{"command_id":"cmd-01","command_digest":"' + digest3 + '"}',
                         "with its members out of order"),
        "duplicate-member": (payload3[:-1] + ',"command_id":"cmd-01"}',
                             "naming command_id twice"),
        "lone-surrogate": (payload3.replace("cmd-01", "cmd-\\ud800"),
                           "holding the escape \\ud800 alone"),
        "number-form": ('{"a_number":1.0,' + payload3[1:], "holding the number 1.0"),
        "integer-beyond-2-53": ('{"a_number":-9007199254740992,' + payload3[1:],
                                "holding the integer -(2^53)"),
        "not-json": ("{", "being the text {"),
    }  # fmt: skip
    deep = canonical_text({**json.loads(payload3), "deep": nested_arrays(128)})
    not_canonical["nesting-129"] = (deep, "nesting 128 arrays in its object (129 levels)")
    for label, (text, how) in not_canonical.items():
        d = s.copy()
        d.entry(3)["payload_json"] = text
        suite.case(
            f"payload-not-canonical-{label}", d,
            broken("payload_not_canonical", 3, d.line(d.entry(3))), ["table", "Primitives"],
            f"entry 3's payload_json {how} (hash left as it was)",
            "payload_json must be strict JSON within the primitives' bounds and its own RFC "
            "8785 canonical text: payload_not_canonical at 3 (N13a: before hash_mismatch)",
        )  # fmt: skip
    d = s.copy()
    d.entry(3)["actor"] = "mallory"
    suite.case(
        "hash-mismatch", d, broken("hash_mismatch", 3, d.line(d.entry(3))), ["table"],
        "entry 3's actor changed, hash kept",
        "hash is digest_of the envelope, which covers actor: hash_mismatch at 3",
    )  # fmt: skip
    d = s.copy()
    e3 = d.entry(3)
    members = ("run_id", "sequence", "kind", "prev_hash", "actor", "recorded_at")
    e3["hash"] = digest_of({**{m: e3[m] for m in members}, "payload": e3["payload_json"]})
    suite.case(
        "hash-mismatch-payload-text-hashed", d, broken("hash_mismatch", 3, d.line(e3)),
        ["Entry hash"],
        "entry 3's hash computed with payload as the payload_json text instead of the value",
        "Entry hash: payload in the envelope is the parsed payload_json, not its text",
    )  # fmt: skip
    d = s.copy()
    d.entry(5)["kind"] = "a_kind_a_later_ledger_writes"
    d.reforge()
    suite.case(
        "valid-unknown-kind", d, valid(), ["N11"],
        "entry 5's kind is one no version knows (hash and signatures recomputed)",
        "N11: a kind is hashed as the text it is; an unknown kind is not refused",
    )  # fmt: skip
    d = s.copy()
    d.set_payload(d.entry(3), {**d.payload(d.entry(3)), "command_id": 7})
    d.reforge()
    suite.case(
        "command-receipt-invalid-id-not-string", d,
        broken("command_receipt_invalid", 3, d.line(d.entry(3))), ["N16"],
        "entry 3 (command_executed) has command_id 7 (reforged)",
        "N16: command_id must be a string: command_receipt_invalid at the receipt",
    )  # fmt: skip
    d = s.copy()
    d.set_payload(d.entry(3), ["cmd-01"])
    d.reforge()
    suite.case(
        "command-receipt-invalid-payload-not-object", d,
        broken("command_receipt_invalid", 3, d.line(d.entry(3))), ["N16"],
        "entry 3 (command_executed) has the payload [\"cmd-01\"] (reforged)",
        "N16: a command_executed payload without a string command_id (here: no object at "
        "all) is command_receipt_invalid",
    )  # fmt: skip
    d = s.copy()
    d.set_payload(d.entry(4), {**d.payload(d.entry(4)), "command_id": "cmd-01"})
    d.reforge()
    suite.case(
        "command-charged-twice", d, broken("command_charged_twice", 4, d.line(d.entry(4))),
        ["table", "N16"], "entry 4 charges cmd-01 again (reforged)",
        "every command_executed charges a command_id not charged before: at entry 4",
    )  # fmt: skip
    d = s.copy()
    d.first("run")["record"]["command_limit"] = 1
    d.reforge()
    suite.case(
        "command-limit-exceeded", d,
        broken("command_limit_exceeded", 4, d.line(d.entry(4))), ["table", "N16"],
        "the run's command_limit is 1 (run_digest recomputed); entries 3 and 4 charge two",
        "N16: the limit is the run record's command_limit; the second charge, at entry 4, "
        "exceeds it",
    )  # fmt: skip
