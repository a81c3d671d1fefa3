"""The records around the journal: section order (N3: trailing data, unknown or repeated
records, missing sections) and the manifest, run and signing-keys records (format, head, run
digest, the run record's members, integer forms, unknown members, key ids, algorithms, sizes and
window forms)."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING

from shared.continuity.canonical import sha256_digest
from vectors.cases.edits import replace_in
from vectors.vector import broken, valid

if TYPE_CHECKING:
    from vectors.generate import Suite


def records_and_order(suite: Suite) -> None:
    s = suite.small
    end = len(s.records)
    suite.case(
        "trailing-data-blank-line", s.bytes() + b"\n", broken("trailing_data", 0, end + 1),
        ["N3", "N1"], "an empty line after the trailer",
        f"N3: any line after the trailer is trailing_data, named at 0, line {end + 1}",
        where=f"line {end + 1}: the empty line after the trailer",
    )  # fmt: skip
    trailer_line = s.bytes().splitlines(keepends=True)[-1]
    suite.case(
        "trailing-data-second-trailer", s.bytes() + trailer_line,
        broken("trailing_data", 0, end + 1), ["N3"], "the trailer line written twice",
        "N3: a line after the trailer is trailing_data (not out_of_order), named at 0",
        where=f"line {end + 1}: the second trailer",
    )  # fmt: skip
    d = s.copy()
    note = d.insert_after(d.first("signing_keys"), {"type": "note", "text": "hello"})
    suite.case(
        "record-invalid-unknown-type", d, broken("record_invalid", 0, d.line(note)), ["N3"],
        "a record of type note after the signing keys",
        "N3: a type naming no record type of the layout table is record_invalid; the line "
        "is about no entry (0)",
    )  # fmt: skip
    d = s.copy()
    d.first("run")["type"] = None
    suite.case(
        "record-invalid-type-not-a-string", d, broken("record_invalid", 0, 2), ["N3"],
        "the run record's type is null", "N3: type must be a string: record_invalid at 0",
    )  # fmt: skip
    d = s.copy()
    second = d.insert_after(d.first("run"), json.loads(json.dumps(d.first("run"))))
    suite.case(
        "out-of-order-second-run-record", d, broken("out_of_order", 0, d.line(second)),
        ["N3"], "the run record written twice",
        "N3: a second record of a one-record section is out_of_order (named at 0)",
    )  # fmt: skip
    d = s.copy()
    late = d.insert_after(d.head(2), json.loads(json.dumps(d.first("signing_keys"))))
    suite.case(
        "out-of-order-keys-after-entries", d, broken("out_of_order", 0, d.line(late)),
        ["N3"], "the signing keys record written again after entry 2 and its signature",
        f"N3: a record of an earlier section after a later one is out_of_order; a keys "
        f"record is named at 0, line {d.line(late)}",
    )  # fmt: skip
    d = s.copy()
    d.remove(d.first("manifest"))
    suite.case(
        "record-missing-manifest", d, broken("record_missing", 0, 1), ["N3", "N2"],
        "the manifest removed",
        "N3: a skipped one-record section is record_missing, found at line 1 (the run "
        "record, N2: the first record after it), named at 0 (a manifest break)",
    )  # fmt: skip
    d = s.copy()
    d.remove(d.first("run"))
    suite.case(
        "record-missing-run", d, broken("record_missing", 0, 2), ["N3", "N2"],
        "the run record removed",
        "N3: record_missing, found reading the signing keys at line 2, named at 0",
    )  # fmt: skip
    d = s.copy()
    d.remove(d.first("signing_keys"))
    first = d.entry(1)
    suite.case(
        "record-missing-signing-keys", d, broken("record_missing", 0, d.line(first)),
        ["N3", "N2", "What the verifier checks"],
        "the signing keys record removed",
        "N3: record_missing, found reading entry 1's line (N2: the first record after the "
        "skipped section); the break is the keys record's, and breaks in the manifest, run, "
        "keys or trailer lines are named at sequence 0, not at entry 1",
    )  # fmt: skip


def manifest_run_keys(suite: Suite) -> None:
    s = suite.small
    d = s.copy()
    d.first("manifest")["format"] = "forge.continuity.audit-bundle/2"
    suite.case(
        "format-unknown", d, broken("format_unknown", 0, 1), ["table"],
        "the manifest's format is forge.continuity.audit-bundle/2",
        "only forge.continuity.audit-bundle/1 is known: format_unknown at 0, line 1",
    )  # fmt: skip
    d = s.copy()
    d.first("manifest")["head"]["sequence"] = -1
    suite.case(
        "record-invalid-manifest-head-sequence", d, broken("record_invalid", 0, 1),
        ["N6", "N5"], "the manifest's head.sequence is -1",
        "N6: head.sequence must be a non-negative integer",
    )  # fmt: skip
    d = s.copy()
    d.first("manifest")["head"]["hash"] = None
    suite.case(
        "record-invalid-manifest-head-hash", d, broken("record_invalid", 0, 1),
        ["N6", "N5"], "the manifest's head.hash is null", "N6: head.hash must be a string",
    )  # fmt: skip
    d = s.copy()
    d.first("run")["record"]["task_id"] = "another-task"
    suite.case(
        "run-digest-mismatch", d, broken("run_digest_mismatch", 0, 2), ["table"],
        "the run record's task_id changed, run_digest kept",
        "digest_of(run.record) is no longer run_digest: run_digest_mismatch at 0",
    )  # fmt: skip
    d = s.copy()
    d.first("run")["record"]["run_id"] = "run-other"
    d.reforge()
    suite.case(
        "run-mismatch-run-record", d, broken("run_mismatch", 0, 2), ["table"],
        "the run record names run-other (run_digest recomputed)",
        "the run record's run_id is not the manifest's: run_mismatch at 0",
    )  # fmt: skip
    d = s.copy()
    d.first("run")["record"]["x_later"] = 1
    d.reforge()
    suite.case(
        "record-invalid-run-record-extra-member", d, broken("record_invalid", 0, 2), ["N4"],
        "the run record gains an eleventh member (run_digest recomputed)",
        "N4: the run's record holds exactly the ten listed members (it is hashed); unlike "
        "other records, an unknown member there is record_invalid",
    )  # fmt: skip
    d = s.copy()
    del d.first("run")["record"]["source_profile"]
    d.reforge()
    suite.case(
        "record-invalid-run-record-missing-member", d, broken("record_invalid", 0, 2),
        ["N4", "N5"], "the run record lacks source_profile (run_digest recomputed)",
        "N4: exactly the ten listed members",
    )  # fmt: skip
    d = s.copy()
    suite.case(
        "record-invalid-command-limit-not-integer", d, broken("record_invalid", 0, 2),
        ["N5"], "the run record's command_limit written 2.0 (the run_digest still matches: "
        "RFC 8785 writes 2.0 as 2)",
        "N5: an integer member is written without fraction or exponent; 2.0 is not an "
        "integer, though its canonical form hashes like one",
        raw=lambda lines: replace_in(lines, 1, b'"command_limit":2,', b'"command_limit":2.0,'),
    )  # fmt: skip
    d = s.copy()
    for record in (d.first("manifest"), d.first("run"), d.first("signing_keys"),
                   d.first("signing_keys")["keys"][0], d.entry(1), d.head(2),
                   d.first("blob"), d.first("blob_absent"), d.first("trailer")):  # fmt: skip
        record["x_later"] = {"added by": "a later exporter"}
    suite.case(
        "valid-unknown-members", d, valid(), ["N4"],
        "a member x_later added to the manifest, run, keys record and one key, entry 1 "
        "(outside its hashed envelope), signed head 2, a blob, a blob_absent and the trailer",
        "N4: members a record does not define are ignored (the trailer's bundle_digest "
        "covers them)",
    )  # fmt: skip
    d = s.copy()
    for bound in ("not_before", "not_after"):
        del d.first("signing_keys")["keys"][0][bound]
    suite.case(
        "valid-key-bounds-absent", d, valid(), ["File layout"],
        "the bundle's key has no not_before or not_after member",
        "layout table, signing_keys: an absent bound means null (unbounded)",
    )  # fmt: skip
    raw = base64.b64decode(s.first("signing_keys")["keys"][0]["public_key"])
    d = s.copy()
    key = d.first("signing_keys")["keys"][0]
    key["key_id"] = sha256_digest(key["public_key"].encode())
    suite.case(
        "signing-key-invalid-key-id-over-text", d, broken("signing_key_invalid", 0, 3),
        ["N7"], "the key's key_id is the digest of its base64 text, not of its 32 bytes",
        "N7: key_id is the SHA-256 of the raw public-key bytes (not over any text)",
    )  # fmt: skip
    d = s.copy()
    d.first("signing_keys")["keys"][0]["algorithm"] = "Ed25519"
    suite.case(
        "signing-key-invalid-algorithm", d, broken("signing_key_invalid", 0, 3), ["N7"],
        "the key's algorithm is Ed25519 (capitalised)", "N7: algorithm must be ed25519",
    )  # fmt: skip
    d = s.copy()
    key = d.first("signing_keys")["keys"][0]
    key["public_key"] = base64.b64encode(raw[:31]).decode()
    key["key_id"] = sha256_digest(raw[:31])
    suite.case(
        "signing-key-invalid-31-bytes", d, broken("signing_key_invalid", 0, 3), ["N7"],
        "the key's public_key is 31 bytes (key_id their digest)",
        "N7: a public key that is not 32 bytes is signing_key_invalid",
    )  # fmt: skip
    d = s.copy()
    d.first("signing_keys")["keys"][0]["not_after"] = "2026-12-06T00:00:00Z"
    suite.case(
        "signing-key-invalid-window-form", d, broken("signing_key_invalid", 0, 3), ["N9"],
        "the key's not_after is 2026-12-06T00:00:00Z (no fractional digits)",
        "N9: a key's bounds are compared as text, so must be of the one timestamp form: "
        "signing_key_invalid for a key",
    )  # fmt: skip
