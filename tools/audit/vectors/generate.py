"""Write the conformance vectors of ``forge.continuity.audit-bundle/1`` into
``tools/audit/vectors/v1`` (tools/audit/vectors/README.md), byte for byte the same on every run.

Real bundles come from real runs (real_runs.py: the services in-process, a fixed clock, a fixed
test key, the real exporter); every other vector is one of them with one rule broken
(drafts.py), its expected outcome worked out here from docs/formats.md: the problem, the
sequence it is named at and the bundle line, with the rule that decides it.

Usage, from the repository root (``make vectors``, ``make vectors-check``)::

    python -m tools.audit.vectors.generate           # rewrite tools/audit/vectors/v1
    python -m tools.audit.vectors.generate --check   # fail if the committed vectors differ
"""

from __future__ import annotations

import argparse
import base64
import difflib
import hashlib
import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from shared.continuity.canonical import canonical_text, digest_of, sha256_digest
from shared.continuity.timeutil import to_text

from .drafts import (
    GENESIS,
    Draft,
    Record,
    as_previous,
    encode,
    envelope_hash,
    key_id,
    key_record,
    sign,
)
from .real_runs import NOW, NOW_TEXT, generate_real_runs, test_key

ROOT = Path(__file__).resolve().parents[3]
VECTORS = ROOT / "tools" / "audit" / "vectors" / "v1"
SUITE = "forge.continuity.audit-bundle/1 conformance vectors"
SUITE_VERSION = 1
BUNDLE_FORMAT = "forge.continuity.audit-bundle/1"
#: docs/formats.md, "File layout": the longest line, its LF not counted.
MAX_LINE_BYTES = 24 * 1024 * 1024
V1 = "forge.continuity.signed-head/1"
PINNED = "keys/ledger.signing-keys.json"
A_SECOND_EARLIER = to_text(NOW - timedelta(seconds=1))
OTHER_DIGEST = sha256_digest(b"a history the ledger never wrote")


def valid() -> dict[str, Any]:
    return {
        "exit_status": 0,
        "valid": True,
        "problem": None,
        "first_broken_sequence": None,
        "line": None,
    }


def broken(problem: str, sequence: int, line: int) -> dict[str, Any]:
    return {
        "exit_status": 1,
        "valid": False,
        "problem": problem,
        "first_broken_sequence": sequence,
        "line": line,
    }


def usage() -> dict[str, Any]:
    return {
        "exit_status": 2,
        "valid": None,
        "problem": None,
        "first_broken_sequence": None,
        "line": None,
    }


@dataclass
class Vector:
    name: str
    bundle: str
    expect: dict[str, Any]
    rules: list[str]
    change: str
    why: str
    trusted_keys: list[str] = field(default_factory=lambda: [PINNED])
    trust_bundle_keys: bool = False
    known_heads: str | None = None
    require_blobs: bool = False
    allow_unsigned_head: bool = False
    source: str = "derived"
    generate: list[dict[str, Any]] | None = None
    #: what stands on the expected line (hand-built bundles)
    where: str | None = None

    def as_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "name": self.name,
            "bundle": self.bundle,
            "source": self.source,
            "options": {
                "trusted_keys": self.trusted_keys,
                "trust_bundle_keys": self.trust_bundle_keys,
                "known_heads": self.known_heads,
                "require_blobs": self.require_blobs,
                "allow_unsigned_head": self.allow_unsigned_head,
            },
            "rules": self.rules,
            "change": self.change,
            "expect": self.expect,
            "why": self.why,
        }
        if self.where is not None:
            document["where"] = self.where
        if self.generate is not None:
            document["generate"] = self.generate
        return document


def nested_arrays(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def describe(draft: Draft, line: int) -> str:
    """What a bundle line holds, for the index: its record type and the sequence it is about."""
    if line > len(draft.records):
        return f"line {line} is past the last record"
    record = draft.records[line - 1]
    kind = record.get("type")
    if kind in ("entry", "signed_head") and isinstance(record.get("sequence"), int):
        return f"line {line}: the {kind} of sequence {record['sequence']}"
    if kind in ("blob", "blob_absent"):
        return f"line {line}: a {kind} record"
    return f"line {line}: the {kind} record" if isinstance(kind, str) else f"line {line}"


def reencoded(record: Record) -> bytes:
    """Another strict JSON encoding of the same values: members in reverse order (``type``
    last), spaces after separators, raw UTF-8 instead of ``\\u`` escapes, ``/`` escaped as
    ``\\/`` and the member name ``run_id`` spelled with an escape."""
    text = json.dumps(dict(reversed(record.items())), ensure_ascii=False, separators=(", ", ": "))
    text = text.replace("/", "\\/").replace('"run_id"', '"\\u0072un_id"')
    return text.encode("utf-8") + b"\n"


def _replace(lines: list[bytes], at: int, old: bytes, new: bytes) -> None:
    if old not in lines[at]:
        raise ValueError(f"{old!r} is not in line {at + 1}")
    lines[at] = lines[at].replace(old, new, 1)


class Suite:
    """Every vector, built from the real runs."""

    def __init__(self, workdir: Path) -> None:
        self.ledger_key = test_key("ledger signing key")
        self.other_key = test_key("another key, which no ledger published")
        self.keys = {key_id(k): k for k in (self.ledger_key, self.other_key)}
        real = generate_real_runs(workdir, self.ledger_key)
        self.real = real
        self.files: dict[str, bytes] = {}
        self.vectors: list[Vector] = []
        #: the records of bundles several vectors share, to say what stands on a line
        self.drafts: dict[str, Draft] = {}
        self.small = Draft.of(real.bundles["run-small"], self.keys)
        self.admitted = self._compact(Draft.of(real.bundles["run-admitted"], self.keys))
        self._key_files()
        self._heads_files()

    # --- files ---------------------------------------------------------------------------------

    def _compact(self, admitted: Draft) -> Draft:
        """The real admitted run with its three stored blobs (a checkpoint, a provider response,
        the derived checkpoint: 30 KB) replaced by short stand-ins, every digest renamed where it
        is quoted, and the bundle reforged: the same history, a few KB."""
        for blob in admitted.all("blob"):
            old = blob["digest"]
            content = json.dumps({"stand_in_for": old}, separators=(",", ":")).encode()
            admitted.rename_digest(old, sha256_digest(content))
            blob["content"] = base64.b64encode(content).decode("ascii")
        return admitted.reforge()

    def _key_files(self) -> None:
        real = self.real
        pinned = real.signing_keys

        def keys_file(**window: str | None) -> bytes:
            document = json.loads(json.dumps(pinned))
            document["keys"][0].update(window)
            return (json.dumps(document, indent=2) + "\n").encode()

        self.files[PINNED] = keys_file()
        self.files["keys/ledger.pub.pem"] = real.public_pem
        self.files["keys/ledger.pub.b64"] = base64.b64encode(real.public_raw) + b"\n"
        self.files["keys/other.pub.pem"] = self._pem(self.other_key)
        self.files["keys/ledger-retired.signing-keys.json"] = keys_file(not_after=A_SECOND_EARLIER)
        after = to_text(NOW + timedelta(microseconds=1))
        self.files["keys/ledger-not-yet.signing-keys.json"] = keys_file(not_before=after)
        self.files["keys/ledger-window-exact.signing-keys.json"] = keys_file(
            not_before=NOW_TEXT, not_after=NOW_TEXT
        )
        self.files["keys/ledger-window-not-timestamp.signing-keys.json"] = keys_file(
            not_after="2026-12-06T00:00:00Z"
        )
        self.files["keys/not-a-key.txt"] = b"this file holds no public key\n"

    @staticmethod
    def _pem(key: Ed25519PrivateKey) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def _head(self, sequence: int, head_hash: str, key: Ed25519PrivateKey) -> Record:
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
        sign(record, self.keys)
        return record

    def _heads_files(self) -> None:
        small = self.small
        self.files["heads/witnessed.jsonl"] = self.real.witnessed
        self.files["heads/witnessed-later.jsonl"] = self.real.witnessed_later
        forked = self._head(3, OTHER_DIGEST, self.ledger_key)
        self.files["heads/forked-at-3.jsonl"] = encode(forked)
        self.files["heads/signed-by-other.jsonl"] = encode(
            self._head(5, small.entry(5)["hash"], self.other_key)
        )
        self.files["heads/two-at-one-sequence.jsonl"] = encode(
            self._head(3, small.entry(3)["hash"], self.ledger_key)
        ) + encode(forked)
        self.files["heads/not-signed-heads.jsonl"] = encode(small.first("manifest"))

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
        self.real_bundles()
        self.reading_lines()
        self.records_and_order()
        self.manifest_run_keys()
        self.journal()
        self.payloads_and_commands()
        self.signed_heads()
        self.keys_and_windows()
        self.signature_chain()
        self.unsigned_heads()
        self.witnesses()
        self.end_of_journal()
        self.policies()
        self.admissions()
        self.tickets()
        self.blobs()
        self.trailer()
        self.long_lines()
        self.usage_errors()

    def real_bundles(self) -> None:
        real = self.real.bundles
        small = "bundles/real-small.jsonl"
        self.files[small] = real["run-small"]
        self.drafts[small] = self.small
        self.files["bundles/real-admitted.jsonl"] = real["run-admitted"]
        self.files["bundles/real-empty.jsonl"] = real["run-empty"]
        self.files["bundles/real-presigned.jsonl"] = real["run-presigned"]
        why_real = (
            "a run written through the services and exported by the ledger's exporter: every "
            "check of the table holds"
        )
        self.add(Vector(
            "valid-real-small", small, valid(), ["table", "N20", "N21"],
            "none: five entries, each head signed, two stored blobs and one the ledger does not "
            "store (blob_absent, reported)", why_real, source="real",
        ))  # fmt: skip
        self.add(Vector(
            "valid-real-admitted", "bundles/real-admitted.jsonl", valid(),
            ["table", "N14", "N17", "N18", "N19"],
            "none: a held run admitted by an operator (settlement and claim signed once, at the "
            "claim), claimed by a worker that charged a command, and completed", why_real,
            source="real",
        ))  # fmt: skip
        self.add(Vector(
            "valid-real-empty", "bundles/real-empty.jsonl", valid(), ["N6"],
            "none: a run created with no entries",
            "N6: head {0, genesis}, no entry or signed_head records, verifies without any "
            "signature", source="real",
        ))  # fmt: skip
        self.add(Vector(
            "valid-real-presigned", "bundles/real-presigned.jsonl", valid(), ["N13"],
            "none: entries 1-2 written by a ledger without a key, declared a pre-signing prefix "
            "by an operator, entries 3-4 signed (unsigned_through 2)",
            "N13: the first /2 signature states unsigned_through 2, so the unsigned entries 1 and "
            "2 are exempt", source="real",
        ))  # fmt: skip
        self.add(Vector(
            "valid-admitted-compact", "bundles/admitted-compact.jsonl", valid(),
            ["table", "N14", "N19"],
            "the real admitted run with its three stored blobs replaced by short stand-ins "
            "(every digest renamed where it is quoted, hashes, signatures and trailer "
            "recomputed): the base of the admission vectors",
            "a consistent rewrite re-signed with the pinned test key breaks no rule",
        ), self.admitted.bytes())  # fmt: skip
        self.add(Vector(
            "valid-pinned-pem-key", small, valid(), ["N8"],
            "the real small run; the trusted key is a PEM PUBLIC KEY",
            "N8: a PEM Ed25519 public key is a trusted-key file (no window)",
            trusted_keys=["keys/ledger.pub.pem"], source="real",
        ))  # fmt: skip
        self.add(Vector(
            "valid-pinned-raw-key", small, valid(), ["N8"],
            "the real small run; the trusted key is the base64 of its 32 raw bytes",
            "N8: the base64 of the 32 raw bytes is a trusted-key file (no window)",
            trusted_keys=["keys/ledger.pub.b64"], source="real",
        ))  # fmt: skip
        self.add(Vector(
            "valid-trust-bundle-keys", small, valid(), ["N8"],
            "the real small run, no trusted key, --trust-bundle-keys",
            "N8: the user asked to trust the bundle's own keys; the verdict is the same (the "
            "report says only internal consistency was checked)",
            trusted_keys=[], trust_bundle_keys=True, source="real",
        ))  # fmt: skip
        self.add(Vector(
            "valid-key-window-inclusive", small, valid(), ["Signing keys file", "N9"],
            "the real small run; the pinned key's window is not_before = not_after = the "
            "signed_at of every head",
            "a key vouches when not_before <= signed_at <= not_after: both bounds are inclusive",
            trusted_keys=["keys/ledger-window-exact.signing-keys.json"], source="real",
        ))  # fmt: skip

    def reading_lines(self) -> None:
        s = self.small
        self.case(
            "valid-trailer-without-lf", s.bytes()[:-1], valid(), ["N1"],
            "the final LF (after the trailer) removed",
            "N1: the last line, the trailer, may lack its LF",
        )  # fmt: skip
        d = s.copy()
        note = "caf\u00e9 \u2713 \U0001f600"
        d.set_payload(d.entry(5), {**d.payload(d.entry(5)), "note": note})
        d.reforge()
        self.add(Vector(
            "valid-other-json-encoding", "bundles/valid-other-json-encoding.jsonl", valid(),
            ["File layout"],
            "every line re-encoded: members in reverse order (type last), spaces after "
            "separators, raw UTF-8 for a non-ASCII payload, '/' escaped as '\\/', the member name "
            "run_id written with a \\u escape; trailer resealed over the new bytes",
            "File layout: a verifier must accept any strict JSON encoding of the same values "
            "(payload_json is a string value: its text, and so the hash, is unchanged)",
        ), b"".join(d.lines(encoder=reencoded)))  # fmt: skip

        d = s.copy()
        e3 = d.entry(3)
        at = d.index(e3)
        self.case(
            "line-unreadable-invalid-utf8", d, broken("line_unreadable", 3, d.line(e3)), ["N1"],
            "a byte 0xFF in entry 3's line",
            f"N1: invalid UTF-8 is line_unreadable; the line is entry 3's (the entry after entry "
            f"2), so the break is named at 3, line {d.line(e3)}",
            raw=lambda lines: _replace(lines, at, b"cmd-01", b"cmd-\xff1"),
        )  # fmt: skip
        d = s.copy()
        self.case(
            "line-unreadable-duplicate-member", d,
            broken("line_unreadable", 3, d.line(d.entry(3))),
            ["N1", "Primitives"], "entry 3's line names the member kind twice",
            "Primitives: a member name repeated in one object is not strict JSON (N1: "
            "line_unreadable), named at entry 3",
            raw=lambda lines: _replace(
                lines, at, b'"kind":"command_executed",',
                b'"kind":"command_executed","kind":"command_executed",',
            ),
        )  # fmt: skip
        d = s.copy()
        d.head(3)["x_count"] = 2**53
        self.case(
            "line-unreadable-integer-beyond-2-53", d,
            broken("line_unreadable", 3, d.line(d.head(3))), ["N1", "Primitives", "N4"],
            "signed head 3's line gains a member x_count: 9007199254740992 (2^53)",
            "Primitives: a line holding an integer beyond ±(2^53−1) is line_unreadable, even in "
            "a member N4 would ignore; a signed head is named at its entry, 3",
        )  # fmt: skip
        d = s.copy()
        d.first("manifest")["x_deep"] = nested_arrays(128)
        self.case(
            "line-unreadable-nesting-129", d, broken("line_unreadable", 0, 1),
            ["N1", "Primitives"],
            "the manifest gains a member holding 128 nested arrays (129 levels with the line's "
            "own object)",
            "Primitives: nesting beyond 128 levels (the line's object is level 1) is "
            "line_unreadable; the manifest is named at 0",
        )  # fmt: skip
        d = s.copy()
        d.first("run")["created_by"] = "LONE-SURROGATE"
        self.case(
            "line-unreadable-lone-surrogate", d, broken("line_unreadable", 0, 2),
            ["N1", "Primitives"], "the run record's created_by is the escape \\ud800 alone",
            "Primitives: a lone surrogate escape has no UTF-8, so the line is not strict JSON; "
            "the run line is named at 0",
            raw=lambda lines: _replace(lines, 1, b'"LONE-SURROGATE"', b'"\\ud800"'),
        )  # fmt: skip
        d = s.copy()
        first_blob = d.first("blob")
        first_blob["x_size"] = "NOT-A-NUMBER"
        blob_at = d.index(first_blob)
        self.case(
            "line-unreadable-nan", d, broken("line_unreadable", 2, d.line(first_blob)),
            ["N1", "Primitives"],
            "the first blob record (the checkpoint entry 2 names) gains a member NaN",
            "Primitives: NaN is not JSON; the n-th blob line is named at the n-th referenced "
            "digest's first referencing sequence: the checkpoint, first named by entry 2",
            raw=lambda lines: _replace(lines, blob_at, b'"NOT-A-NUMBER"', b"NaN"),
        )  # fmt: skip
        d = s.copy()
        self.case(
            "line-unreadable-blank-line", d, broken("line_unreadable", 0, 2), ["N1", "N2"],
            "an empty line between the manifest and the run record",
            "File layout: no blank lines; an empty line is no JSON object (N1), read as line 2 "
            "where the run record belongs (named at 0)",
            raw=lambda lines: lines.__setitem__(0, lines[0] + b"\n"),
            where="line 2: the empty line",
        )  # fmt: skip
        d = s.copy()
        trailer_at = d.index(d.first("trailer"))
        self.case(
            "line-unreadable-array", d, broken("line_unreadable", 0, d.line(d.first("trailer"))),
            ["N1"], "the trailer line replaced by a JSON array",
            "N1: a line that is not a JSON object is line_unreadable; in the trailer's place it "
            "is named at 0",
            raw=lambda lines: lines.__setitem__(trailer_at, b'["trailer"]\n'),
            seal=False,
            where=f"line {d.line(d.first('trailer'))}: the array, where the trailer belongs",
        )  # fmt: skip

    def records_and_order(self) -> None:
        s = self.small
        end = len(s.records)
        self.case(
            "trailing-data-blank-line", s.bytes() + b"\n", broken("trailing_data", 0, end + 1),
            ["N3", "N1"], "an empty line after the trailer",
            f"N3: any line after the trailer is trailing_data, named at 0, line {end + 1}",
            where=f"line {end + 1}: the empty line after the trailer",
        )  # fmt: skip
        trailer_line = s.bytes().splitlines(keepends=True)[-1]
        self.case(
            "trailing-data-second-trailer", s.bytes() + trailer_line,
            broken("trailing_data", 0, end + 1), ["N3"], "the trailer line written twice",
            "N3: a line after the trailer is trailing_data (not out_of_order), named at 0",
            where=f"line {end + 1}: the second trailer",
        )  # fmt: skip
        d = s.copy()
        note = d.insert_after(d.first("signing_keys"), {"type": "note", "text": "hello"})
        self.case(
            "record-invalid-unknown-type", d, broken("record_invalid", 0, d.line(note)), ["N3"],
            "a record of type note after the signing keys",
            "N3: a type naming no record type of the layout table is record_invalid; the line "
            "is about no entry (0)",
        )  # fmt: skip
        d = s.copy()
        d.first("run")["type"] = None
        self.case(
            "record-invalid-type-not-a-string", d, broken("record_invalid", 0, 2), ["N3"],
            "the run record's type is null", "N3: type must be a string: record_invalid at 0",
        )  # fmt: skip
        d = s.copy()
        second = d.insert_after(d.first("run"), json.loads(json.dumps(d.first("run"))))
        self.case(
            "out-of-order-second-run-record", d, broken("out_of_order", 0, d.line(second)),
            ["N3"], "the run record written twice",
            "N3: a second record of a one-record section is out_of_order (named at 0)",
        )  # fmt: skip
        d = s.copy()
        late = d.insert_after(d.head(2), json.loads(json.dumps(d.first("signing_keys"))))
        self.case(
            "out-of-order-keys-after-entries", d, broken("out_of_order", 0, d.line(late)),
            ["N3"], "the signing keys record written again after entry 2 and its signature",
            f"N3: a record of an earlier section after a later one is out_of_order; a keys "
            f"record is named at 0, line {d.line(late)}",
        )  # fmt: skip
        d = s.copy()
        d.remove(d.first("manifest"))
        self.case(
            "record-missing-manifest", d, broken("record_missing", 0, 1), ["N3", "N2"],
            "the manifest removed",
            "N3: a skipped one-record section is record_missing, found at line 1 (the run "
            "record, N2: the first record after it), named at 0 (a manifest break)",
        )  # fmt: skip
        d = s.copy()
        d.remove(d.first("run"))
        self.case(
            "record-missing-run", d, broken("record_missing", 0, 2), ["N3", "N2"],
            "the run record removed",
            "N3: record_missing, found reading the signing keys at line 2, named at 0",
        )  # fmt: skip
        d = s.copy()
        d.remove(d.first("signing_keys"))
        first = d.entry(1)
        self.case(
            "record-missing-signing-keys", d, broken("record_missing", 0, d.line(first)),
            ["N3", "N2", "What the verifier checks"],
            "the signing keys record removed",
            "N3: record_missing, found reading entry 1's line (N2: the first record after the "
            "skipped section); the break is the keys record's, and breaks in the manifest, run, "
            "keys or trailer lines are named at sequence 0, not at entry 1",
        )  # fmt: skip

    def manifest_run_keys(self) -> None:
        s = self.small
        d = s.copy()
        d.first("manifest")["format"] = "forge.continuity.audit-bundle/2"
        self.case(
            "format-unknown", d, broken("format_unknown", 0, 1), ["table"],
            "the manifest's format is forge.continuity.audit-bundle/2",
            "only forge.continuity.audit-bundle/1 is known: format_unknown at 0, line 1",
        )  # fmt: skip
        d = s.copy()
        d.first("manifest")["head"]["sequence"] = -1
        self.case(
            "record-invalid-manifest-head-sequence", d, broken("record_invalid", 0, 1),
            ["N6", "N5"], "the manifest's head.sequence is -1",
            "N6: head.sequence must be a non-negative integer",
        )  # fmt: skip
        d = s.copy()
        d.first("manifest")["head"]["hash"] = None
        self.case(
            "record-invalid-manifest-head-hash", d, broken("record_invalid", 0, 1),
            ["N6", "N5"], "the manifest's head.hash is null", "N6: head.hash must be a string",
        )  # fmt: skip
        d = s.copy()
        d.first("run")["record"]["task_id"] = "another-task"
        self.case(
            "run-digest-mismatch", d, broken("run_digest_mismatch", 0, 2), ["table"],
            "the run record's task_id changed, run_digest kept",
            "digest_of(run.record) is no longer run_digest: run_digest_mismatch at 0",
        )  # fmt: skip
        d = s.copy()
        d.first("run")["record"]["run_id"] = "run-other"
        d.reforge()
        self.case(
            "run-mismatch-run-record", d, broken("run_mismatch", 0, 2), ["table"],
            "the run record names run-other (run_digest recomputed)",
            "the run record's run_id is not the manifest's: run_mismatch at 0",
        )  # fmt: skip
        d = s.copy()
        d.first("run")["record"]["x_later"] = 1
        d.reforge()
        self.case(
            "record-invalid-run-record-extra-member", d, broken("record_invalid", 0, 2), ["N4"],
            "the run record gains an eleventh member (run_digest recomputed)",
            "N4: the run's record holds exactly the ten listed members (it is hashed); unlike "
            "other records, an unknown member there is record_invalid",
        )  # fmt: skip
        d = s.copy()
        del d.first("run")["record"]["source_profile"]
        d.reforge()
        self.case(
            "record-invalid-run-record-missing-member", d, broken("record_invalid", 0, 2),
            ["N4", "N5"], "the run record lacks source_profile (run_digest recomputed)",
            "N4: exactly the ten listed members",
        )  # fmt: skip
        d = s.copy()
        self.case(
            "record-invalid-command-limit-not-integer", d, broken("record_invalid", 0, 2),
            ["N5"], "the run record's command_limit written 2.0 (the run_digest still matches: "
            "RFC 8785 writes 2.0 as 2)",
            "N5: an integer member is written without fraction or exponent; 2.0 is not an "
            "integer, though its canonical form hashes like one",
            raw=lambda lines: _replace(lines, 1, b'"command_limit":2,', b'"command_limit":2.0,'),
        )  # fmt: skip
        d = s.copy()
        for record in (d.first("manifest"), d.first("run"), d.first("signing_keys"),
                       d.first("signing_keys")["keys"][0], d.entry(1), d.head(2),
                       d.first("blob"), d.first("blob_absent"), d.first("trailer")):  # fmt: skip
            record["x_later"] = {"added by": "a later exporter"}
        self.case(
            "valid-unknown-members", d, valid(), ["N4"],
            "a member x_later added to the manifest, run, keys record and one key, entry 1 "
            "(outside its hashed envelope), signed head 2, a blob, a blob_absent and the trailer",
            "N4: members a record does not define are ignored (the trailer's bundle_digest "
            "covers them)",
        )  # fmt: skip
        d = s.copy()
        for bound in ("not_before", "not_after"):
            del d.first("signing_keys")["keys"][0][bound]
        self.case(
            "valid-key-bounds-absent", d, valid(), ["File layout"],
            "the bundle's key has no not_before or not_after member",
            "layout table, signing_keys: an absent bound means null (unbounded)",
        )  # fmt: skip
        raw = base64.b64decode(s.first("signing_keys")["keys"][0]["public_key"])
        d = s.copy()
        key = d.first("signing_keys")["keys"][0]
        key["key_id"] = sha256_digest(key["public_key"].encode())
        self.case(
            "signing-key-invalid-key-id-over-text", d, broken("signing_key_invalid", 0, 3),
            ["N7"], "the key's key_id is the digest of its base64 text, not of its 32 bytes",
            "N7: key_id is the SHA-256 of the raw public-key bytes (not over any text)",
        )  # fmt: skip
        d = s.copy()
        d.first("signing_keys")["keys"][0]["algorithm"] = "Ed25519"
        self.case(
            "signing-key-invalid-algorithm", d, broken("signing_key_invalid", 0, 3), ["N7"],
            "the key's algorithm is Ed25519 (capitalised)", "N7: algorithm must be ed25519",
        )  # fmt: skip
        d = s.copy()
        key = d.first("signing_keys")["keys"][0]
        key["public_key"] = base64.b64encode(raw[:31]).decode()
        key["key_id"] = sha256_digest(raw[:31])
        self.case(
            "signing-key-invalid-31-bytes", d, broken("signing_key_invalid", 0, 3), ["N7"],
            "the key's public_key is 31 bytes (key_id their digest)",
            "N7: a public key that is not 32 bytes is signing_key_invalid",
        )  # fmt: skip
        d = s.copy()
        d.first("signing_keys")["keys"][0]["not_after"] = "2026-12-06T00:00:00Z"
        self.case(
            "signing-key-invalid-window-form", d, broken("signing_key_invalid", 0, 3), ["N9"],
            "the key's not_after is 2026-12-06T00:00:00Z (no fractional digits)",
            "N9: a key's bounds are compared as text, so must be of the one timestamp form: "
            "signing_key_invalid for a key",
        )  # fmt: skip

    def journal(self) -> None:
        s = self.small
        d = s.copy()
        d.remove(d.entry(3), d.head(3))
        self.case(
            "sequence-gap-missing-entry", d, broken("sequence_gap", 3, d.line(d.entry(4))),
            ["N10"], "entry 3 and its signed head removed",
            "N10: the entry read after entry 2 says 4; the gap is named at the sequence "
            "expected, 3, on that entry's line",
        )  # fmt: skip
        d = s.copy()
        again = d.insert_after(d.head(3), json.loads(json.dumps(d.entry(3))))
        self.case(
            "sequence-gap-repeated-entry", d, broken("sequence_gap", 4, d.line(again)),
            ["N10"], "entry 3 written again after its signed head",
            "N10: 4 is expected and 3 is found: sequence_gap named at 4",
        )  # fmt: skip
        d = s.copy()
        at = d.index(d.entry(3))
        self.case(
            "record-invalid-entry-sequence-not-integer", d,
            broken("record_invalid", 3, d.line(d.entry(3))), ["N5"],
            "entry 3's sequence written 3.0 (its hash still matches: RFC 8785 writes 3.0 as 3)",
            "N5: 3.0 is not an integer; an entry is named at its own (the expected) sequence",
            raw=lambda lines: _replace(lines, at, b'"sequence":3,', b'"sequence":3.0,'),
        )  # fmt: skip
        d = s.copy()
        d.entry(3)["run_id"] = "run-other"
        d.reforge()
        self.case(
            "run-mismatch-entry", d, broken("run_mismatch", 3, d.line(d.entry(3))), ["table"],
            "entry 3 names run-other (hash, chain and signatures recomputed)",
            "each entry names the manifest's run: run_mismatch at 3",
        )  # fmt: skip
        d = s.copy()
        e3 = d.entry(3)
        e3["prev_hash"] = d.entry(1)["hash"]
        e3["hash"] = envelope_hash(e3)
        self.case(
            "link-mismatch", d, broken("link_mismatch", 3, d.line(e3)), ["table"],
            "entry 3's prev_hash is entry 1's hash (its own hash recomputed over it)",
            "prev_hash must be the previous entry's hash: link_mismatch at 3",
        )  # fmt: skip
        d = s.copy()
        e3 = d.entry(3)
        e3["run_id"] = "run-other"
        e3["prev_hash"] = d.entry(1)["hash"]
        self.case(
            "order-run-mismatch-before-link-mismatch", d,
            broken("run_mismatch", 3, d.line(e3)), ["N13a"],
            "entry 3 names run-other and links to entry 1; its hash is stale too",
            "N13a: an entry's checks run sequence_gap, run_mismatch, link_mismatch, "
            "payload_not_canonical, hash_mismatch: the first failing is run_mismatch",
        )  # fmt: skip

    def payloads_and_commands(self) -> None:
        s = self.small
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
            self.case(
                f"payload-not-canonical-{label}", d,
                broken("payload_not_canonical", 3, d.line(d.entry(3))), ["table", "Primitives"],
                f"entry 3's payload_json {how} (hash left as it was)",
                "payload_json must be strict JSON within the primitives' bounds and its own RFC "
                "8785 canonical text: payload_not_canonical at 3 (N13a: before hash_mismatch)",
            )  # fmt: skip
        d = s.copy()
        d.entry(3)["actor"] = "mallory"
        self.case(
            "hash-mismatch", d, broken("hash_mismatch", 3, d.line(d.entry(3))), ["table"],
            "entry 3's actor changed, hash kept",
            "hash is digest_of the envelope, which covers actor: hash_mismatch at 3",
        )  # fmt: skip
        d = s.copy()
        e3 = d.entry(3)
        members = ("run_id", "sequence", "kind", "prev_hash", "actor", "recorded_at")
        e3["hash"] = digest_of({**{m: e3[m] for m in members}, "payload": e3["payload_json"]})
        self.case(
            "hash-mismatch-payload-text-hashed", d, broken("hash_mismatch", 3, d.line(e3)),
            ["Entry hash"],
            "entry 3's hash computed with payload as the payload_json text instead of the value",
            "Entry hash: payload in the envelope is the parsed payload_json, not its text",
        )  # fmt: skip
        d = s.copy()
        d.entry(5)["kind"] = "a_kind_a_later_ledger_writes"
        d.reforge()
        self.case(
            "valid-unknown-kind", d, valid(), ["N11"],
            "entry 5's kind is one no version knows (hash and signatures recomputed)",
            "N11: a kind is hashed as the text it is; an unknown kind is not refused",
        )  # fmt: skip
        d = s.copy()
        d.set_payload(d.entry(3), {**d.payload(d.entry(3)), "command_id": 7})
        d.reforge()
        self.case(
            "command-receipt-invalid-id-not-string", d,
            broken("command_receipt_invalid", 3, d.line(d.entry(3))), ["N16"],
            "entry 3 (command_executed) has command_id 7 (reforged)",
            "N16: command_id must be a string: command_receipt_invalid at the receipt",
        )  # fmt: skip
        d = s.copy()
        d.set_payload(d.entry(3), ["cmd-01"])
        d.reforge()
        self.case(
            "command-receipt-invalid-payload-not-object", d,
            broken("command_receipt_invalid", 3, d.line(d.entry(3))), ["N16"],
            "entry 3 (command_executed) has the payload [\"cmd-01\"] (reforged)",
            "N16: a command_executed payload without a string command_id (here: no object at "
            "all) is command_receipt_invalid",
        )  # fmt: skip
        d = s.copy()
        d.set_payload(d.entry(4), {**d.payload(d.entry(4)), "command_id": "cmd-01"})
        d.reforge()
        self.case(
            "command-charged-twice", d, broken("command_charged_twice", 4, d.line(d.entry(4))),
            ["table", "N16"], "entry 4 charges cmd-01 again (reforged)",
            "every command_executed charges a command_id not charged before: at entry 4",
        )  # fmt: skip
        d = s.copy()
        d.first("run")["record"]["command_limit"] = 1
        d.reforge()
        self.case(
            "command-limit-exceeded", d,
            broken("command_limit_exceeded", 4, d.line(d.entry(4))), ["table", "N16"],
            "the run's command_limit is 1 (run_digest recomputed); entries 3 and 4 charge two",
            "N16: the limit is the run record's command_limit; the second charge, at entry 4, "
            "exceeds it",
        )  # fmt: skip

    def signed_heads(self) -> None:
        s = self.small
        d = s.copy()
        again = d.insert_after(d.head(2), json.loads(json.dumps(d.head(2))))
        self.case(
            "signature-misplaced-second-head", d,
            broken("signature_misplaced", 2, d.line(again)), ["N12"],
            "signed head 2 written twice",
            "N12: a signed head following another of the same entry is signature_misplaced, "
            "named at the entry just read, 2",
        )  # fmt: skip
        d = s.copy()
        h3 = d.head(3)
        h3["sequence"] = 4
        sign(h3, self.keys)
        self.case(
            "signature-misplaced-wrong-sequence", d, broken("signature_misplaced", 3, d.line(h3)),
            ["N12"], "the signed head after entry 3 says sequence 4 (signed so)",
            "N12: a signed head whose sequence is not the entry just read's is misplaced, "
            "named at that entry, 3",
        )  # fmt: skip
        d = s.copy()
        h3 = d.head(3)
        h3["head_hash"] = d.entry(2)["hash"]
        sign(h3, self.keys)
        self.case(
            "signed-head-mismatch-hash", d, broken("signed_head_mismatch", 3, d.line(h3)),
            ["N12"], "signed head 3 signs entry 2's hash (validly signed)",
            "N12: a head_hash that differs from its entry's hash is signed_head_mismatch",
        )  # fmt: skip
        d = s.copy()
        h3 = d.head(3)
        h3["run_id"] = "run-other"
        sign(h3, self.keys)
        self.case(
            "signed-head-mismatch-run", d, broken("signed_head_mismatch", 3, d.line(h3)),
            ["N12"], "signed head 3 names run-other (validly signed)",
            "N12: a run_id that differs from its entry's is signed_head_mismatch",
        )  # fmt: skip
        d = s.copy()
        h3 = d.head(3)
        h3["head_hash"] = d.entry(2)["hash"]
        h3["key_id"] = key_id(self.other_key)
        sign(h3, self.keys)
        self.case(
            "order-signed-head-mismatch-before-key", d,
            broken("signed_head_mismatch", 3, d.line(h3)), ["N12", "N13a"],
            "signed head 3 signs entry 2's hash with a key no one published",
            "N12: signed_head_mismatch is found before the key is looked at (not "
            "signing_key_unknown)",
        )  # fmt: skip
        d = s.copy()
        h3 = d.head(3)
        h3["signed_at"] = "2026-12-02T15:48:52Z"
        sign(h3, self.keys)
        self.case(
            "record-invalid-signed-at-form", d, broken("record_invalid", 3, d.line(h3)),
            ["N9", "N13a"], "signed head 3's signed_at has no fractional digits (signed so)",
            "N9: signed_at must be of the one timestamp form: record_invalid for a signed head",
        )  # fmt: skip
        d = s.copy()
        h3 = d.head(3)
        h3["signature"] = h3["signature"].rstrip("=")
        self.case(
            "record-invalid-signature-base64", d, broken("record_invalid", 3, d.line(h3)),
            ["N5"], "signed head 3's signature without its base64 padding",
            "N5: base64 members are strict RFC 4648 with padding",
        )  # fmt: skip

    def keys_and_windows(self) -> None:
        s = self.small
        d = s.copy()
        h3 = d.head(3)
        h3["key_id"] = key_id(self.other_key)
        sign(h3, self.keys)
        self.case(
            "signing-key-unknown", d, broken("signing_key_unknown", 3, d.line(h3)), ["table"],
            "signed head 3 signed by a key the bundle does not publish",
            "its key is not published: signing_key_unknown at 3",
        )  # fmt: skip
        d = s.copy()
        d.first("signing_keys")["keys"].append(key_record(self.other_key))
        h3 = d.head(3)
        h3["key_id"] = key_id(self.other_key)
        sign(h3, self.keys)
        self.case(
            "signing-key-untrusted", d, broken("signing_key_untrusted", 3, d.line(h3)),
            ["table", "N8"],
            "the bundle also publishes another key; signed head 3 is signed by it",
            "published but not pinned: signing_key_untrusted at 3",
        )  # fmt: skip
        self.add(Vector(
            "signing-key-untrusted-not-pinned", "bundles/real-small.jsonl",
            broken("signing_key_untrusted", 1, s.line(s.head(1))), ["table", "N8"],
            "the real small run; the only trusted key is another one",
            "the bundle's key is published, not pinned: signing_key_untrusted at the first "
            "signed head",
            trusted_keys=["keys/other.pub.pem"],
        ))  # fmt: skip
        self.add(Vector(
            "signing-key-outside-window-pinned-retired", "bundles/real-small.jsonl",
            broken("signing_key_outside_window", 1, s.line(s.head(1))),
            ["Signing keys file", "table"],
            "the real small run; the pinned key was retired a second before the heads were "
            "signed",
            "a key vouches only when signed_at <= not_after: outside its window at the first "
            "signed head",
            trusted_keys=["keys/ledger-retired.signing-keys.json"],
        ))  # fmt: skip
        self.add(Vector(
            "signing-key-outside-window-pinned-not-yet", "bundles/real-small.jsonl",
            broken("signing_key_outside_window", 1, s.line(s.head(1))),
            ["Signing keys file", "table"],
            "the real small run; the pinned key's not_before is a microsecond after signed_at",
            "not_before <= signed_at fails at the first signed head",
            trusted_keys=["keys/ledger-not-yet.signing-keys.json"],
        ))  # fmt: skip
        d = s.copy()
        d.first("signing_keys")["keys"][0]["not_after"] = A_SECOND_EARLIER
        self.case(
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
        self.case(
            "signature-invalid", d, broken("signature_invalid", 3, d.line(h3)), ["table"],
            "one bit of signed head 3's signature flipped",
            "the signature does not verify over its statement: signature_invalid at 3",
        )  # fmt: skip

    def signature_chain(self) -> None:
        s = self.small
        d = s.copy()
        h3 = d.head(3)
        h3["previous"]["signature_digest"] = OTHER_DIGEST
        self.case(
            "order-signature-invalid-before-chain", d,
            broken("signature_invalid", 3, d.line(h3)), ["N13a"],
            "signed head 3's previous.signature_digest changed, not re-signed",
            "N13a: the signature is checked before the chain: signature_invalid, not "
            "signature_chain_broken",
        )  # fmt: skip
        d = s.copy()
        h3 = d.head(3)
        h3["format"] = "forge.continuity.signed-head/2"
        self._v1_statement_signed_as_v2(h3)
        self.case(
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
            sign(head, self.keys)
            self.case(
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
            self._to_v1(d.head(2), keep_format=True)
            d.reforge()
            head = d.head(3)
            head.update(members)
            sign(head, self.keys)
            self.case(
                f"signature-chain-broken-{label}-across-v1", d,
                broken("signature_chain_broken", 3, d.line(head)), ["Signed head", "table"],
                f"signed head 2 is a /1 signature; signed head 3 (/2, naming it as previous) "
                f"{what} (validly signed)",
                "unsigned_through is the same in every /2 signature of a run and signed_at never "
                "decreases along the /2 chain, whatever /1 signatures lie between: signed head 3 "
                "is compared with signed head 1, the /2 signature before it",
            )  # fmt: skip
        d = s.copy()
        self._to_v1(d.head(1), keep_format=False)
        self._to_v1(d.head(2), keep_format=True)
        d.reforge()
        self.case(
            "valid-v1-signatures-before-chain", d, valid(), ["Signed head", "N13"],
            "signed heads 1 and 2 are /1 signatures (the first without a format member); signed "
            "head 3, the first /2, names signed head 2 as previous",
            "a /1 signature covers its six members and may precede /2 signatures, which name it "
            "as previous; a record without format is /1; every entry is covered",
        )  # fmt: skip
        d = s.copy()
        for head in d.all("signed_head"):
            self._to_v1(head, keep_format=False)
        d.reforge()
        self.case(
            "valid-v1-signatures-only", d, valid(), ["Signed head", "N13"],
            "every signed head is a /1 signature", "every entry has a trusted signed head",
        )  # fmt: skip

    def _to_v1(self, head: Record, *, keep_format: bool) -> None:
        head.pop("previous", None)
        head.pop("unsigned_through", None)
        if keep_format:
            head["format"] = V1
        else:
            del head["format"]

    def _v1_statement_signed_as_v2(self, head: Record) -> None:
        v1 = {k: v for k, v in head.items() if k not in ("previous", "unsigned_through")}
        v1["format"] = V1
        sign(v1, self.keys)
        head["signature"] = v1["signature"]

    def unsigned_heads(self) -> None:
        s = self.small
        d = s.copy()
        d.remove(d.head(3))
        d.reforge()
        self.case(
            "head-unsigned-middle", d, broken("head_unsigned", 3, d.line(d.entry(4))),
            ["N13", "N13a"], "signed head 3 removed (the chain re-signed around it)",
            "N13: entry 3 is covered by no signed head; found when entry 4 arrives (N13a: "
            "head_unsigned of the entry before it), named at 3 on entry 4's line",
        )  # fmt: skip
        d = s.copy()
        d.remove(d.head(5))
        self.case(
            "head-unsigned-last", d, broken("head_unsigned", 5, d.after_journal()),
            ["N13", "N2"], "the last signed head removed",
            "N13: entry 5 is uncovered, found at the end of the journal (N2: on the line of the "
            "first record after it)",
        )  # fmt: skip
        d = s.copy()
        d.remove(d.head(1), d.head(2))
        d.reforge()
        self.case(
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
        self.case(
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
        self.case(
            "valid-declared-prefix", d, valid(), ["N13"],
            "signed heads 1 and 2 removed; every signature states unsigned_through 2",
            "N13: entries 1..unsigned_through may lack a signature",
        )  # fmt: skip
        d = s.copy()
        d.remove(*d.all("signed_head"))
        self.case(
            "head-unsigned-no-signature", d, broken("head_unsigned", 1, d.after_journal()),
            ["N13", "N2"], "every signed head removed",
            "N13: with no /2 signature, unsigned_through is taken as 0 at the end of the "
            "journal: the first uncovered entry, 1, on the line after the journal",
        )  # fmt: skip
        d = s.copy()
        for head in d.all("signed_head"):
            self._to_v1(head, keep_format=False)
        d.remove(d.head(3))
        d.reforge()
        self.case(
            "head-unsigned-v1-only", d, broken("head_unsigned", 3, d.after_journal()), ["N13"],
            "every signed head a /1 signature, and signed head 3 removed",
            "N13: no /2 signature states a prefix, so the uncovered entry 3 is named at the end "
            "of the journal",
        )  # fmt: skip
        d = s.copy()
        d.remove(d.head(3), d.head(4))
        d.reforge()
        self.case(
            "valid-allow-unsigned-head", d, valid(), ["N13", "table"],
            "signed heads 3 and 4 removed; --allow-unsigned-head",
            "with --allow-unsigned-head uncovered entries are counted instead of a break",
            allow_unsigned_head=True,
        )  # fmt: skip
        d = s.copy()
        d.remove(d.head(2))
        d.reforge()
        d.entry(3)["actor"] = "mallory"
        self.case(
            "order-hash-mismatch-before-head-unsigned", d,
            broken("hash_mismatch", 3, d.line(d.entry(3))), ["N13a"],
            "signed head 2 removed, and entry 3's actor changed with its hash kept",
            "N13a: this entry's hash_mismatch is checked before head_unsigned of the entry "
            "before it",
        )  # fmt: skip

    def witnesses(self) -> None:
        s = self.small
        small = "bundles/real-small.jsonl"
        self.add(Vector(
            "valid-witnessed", small, valid(), ["Heads file and the head feed"],
            "the real small run and the heads a monitor recorded (heads watch) when it was "
            "exported, with other runs' heads",
            "the bundle extends every head witnessed for its run; other runs' heads are ignored",
            known_heads="heads/witnessed.jsonl", source="real",
        ))  # fmt: skip
        self.add(Vector(
            "rollback", small, broken("rollback", 7, s.after_journal()),
            ["Heads file and the head feed", "N2"],
            "the real small run exported at head 5; the monitor witnessed head 7 after the run "
            "grew",
            "the journal does not reach the newest witnessed sequence: rollback named at 7, "
            "found at the end of the journal", known_heads="heads/witnessed-later.jsonl",
        ))  # fmt: skip
        self.add(Vector(
            "fork", small, broken("fork", 3, s.line(s.entry(3))),
            ["Heads file and the head feed", "N13a"],
            "the real small run; the heads file holds a head at 3 with another hash (signed by "
            "the pinned key)",
            "the entry at a witnessed sequence has another hash: fork named at 3, on entry 3's "
            "line", known_heads="heads/forked-at-3.jsonl",
        ))  # fmt: skip
        forged = s.copy()
        forged.set_payload(forged.entry(2), {**forged.payload(forged.entry(2)), "forged": True})
        forged.first("signing_keys")["keys"] = [key_record(self.other_key)]
        for head in forged.all("signed_head"):
            head["key_id"] = key_id(self.other_key)
        forged.reforge()
        name = "bundles/forged-small.jsonl"
        self.drafts[name] = forged
        self.add(Vector(
            "valid-forged-bundle-trusting-its-own-keys", name, valid(), ["N8"],
            "entry 2 rewritten and the whole bundle re-signed, chain and all, by another key it "
            "publishes; --trust-bundle-keys",
            "N8: trusting the bundle's own keys checks internal consistency only; a consistent "
            "forgery passes",
            trusted_keys=[], trust_bundle_keys=True,
        ), forged.bytes())  # fmt: skip
        self.add(Vector(
            "signing-key-untrusted-forged-bundle", name,
            broken("signing_key_untrusted", 1, forged.line(forged.head(1))), ["N8", "table"],
            "the same forgery, against the pinned key",
            "the forger's key is published by the bundle, not pinned: signing_key_untrusted at "
            "the first signed head",
        ))  # fmt: skip
        self.add(Vector(
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
        self.case(
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
        self.case(
            "order-fork-before-command-ledger", d, broken("fork", 3, d.line(d.entry(3))),
            ["N13a", "N16"],
            "entry 3's command_id is 7 (reforged); a head at 3 with another hash witnessed",
            "N13a: fork at this entry comes before the command ledger at this entry",
            known_heads="heads/forked-at-3.jsonl",
        )  # fmt: skip
        d = s.copy()
        d.remove(d.head(5))
        self.case(
            "order-head-unsigned-before-rollback", d,
            broken("head_unsigned", 5, d.after_journal()), ["N15"],
            "the last signed head removed; head 7 witnessed",
            "N15: head_unsigned is found before rollback at the end of the journal",
            known_heads="heads/witnessed-later.jsonl",
        )  # fmt: skip

    def end_of_journal(self) -> None:
        s = self.small
        d = s.copy()
        d.first("manifest")["head"]["sequence"] = 6
        self.case(
            "head-mismatch-sequence-beyond", d, broken("head_mismatch", 6, d.after_journal()),
            ["N15", "N2"], "the manifest's head says sequence 6; the journal ends at 5",
            "N15: named at the larger of the last entry's sequence and the head's, 6, found on "
            "the first line after the journal",
        )  # fmt: skip
        d = s.copy()
        d.first("manifest")["head"] = {"sequence": 3, "hash": d.entry(3)["hash"]}
        self.case(
            "head-mismatch-sequence-before", d, broken("head_mismatch", 5, d.after_journal()),
            ["N15"], "the manifest's head is entry 3; the journal goes on to 5",
            "N15: the larger of 5 and 3",
        )  # fmt: skip
        d = s.copy()
        d.first("manifest")["head"]["hash"] = d.entry(4)["hash"]
        self.case(
            "head-mismatch-hash", d, broken("head_mismatch", 5, d.after_journal()), ["N15"],
            "the manifest's head names sequence 5 with entry 4's hash",
            "N15: the journal does not end at the manifest's head (by hash)",
        )  # fmt: skip
        e = Draft.of(self.real.bundles["run-empty"], self.keys)
        e.first("manifest")["head"]["hash"] = OTHER_DIGEST
        self.case(
            "head-mismatch-empty-journal", e,
            broken("head_mismatch", 0, e.after(("signing_keys",))), ["N6", "N15"],
            "the empty run's manifest head is sequence 0 with a hash that is not genesis",
            "N6: an empty journal's head is {0, genesis}; named at 0 on the first line after "
            "the (empty) journal",
        )  # fmt: skip

    def _citing(self, draft: Draft) -> int:
        """The first sequence citing a policy revision (N17: an integer top-level member)."""
        for entry in draft.all("entry"):
            revision = json.loads(entry["payload_json"]).get("policy_revision")
            if isinstance(revision, int) and not isinstance(revision, bool):
                return int(entry["sequence"])
        raise ValueError("no entry cites a policy revision")

    def policies(self) -> None:
        a, s = self.admitted, self.small
        citing = self._citing(a)
        d = a.copy()
        d.remove(d.first("policy"))
        self.case(
            "policy-missing-dropped", d,
            broken("policy_missing", citing, d.line(d.first("admission"))),
            ["table", "N17", "N2"], "the policy record removed",
            f"the cited revision has no policy record: named at its first citing sequence, "
            f"{citing}, found at the end of the policy section (N2: the admission's line)",
        )  # fmt: skip
        d = a.copy()
        d.first("policy")["revision"] = 3
        d.reforge()
        self.case(
            "policy-missing-wrong-revision", d,
            broken("policy_missing", citing, d.line(d.first("policy"))), ["table", "N17"],
            "the policy record is revision 3 (digest recomputed); revision 2 is cited",
            "the first policy line must be the first cited revision; it is named at that "
            "revision's first citing sequence",
        )  # fmt: skip
        d = a.copy()
        d.first("policy")["settings"]["window_seconds"] = 60
        self.case(
            "policy-digest-mismatch", d,
            broken("policy_digest_mismatch", citing, d.line(d.first("policy"))), ["table"],
            "a setting of the policy record changed, its digest kept",
            "digest_of({revision, ...settings}) != digest: named at the first citing sequence",
        )  # fmt: skip
        policy = a.first("policy")

        def with_policy(revision: int) -> Record:
            record: Record = json.loads(json.dumps(policy))
            record["revision"] = revision
            return record

        d = s.copy()
        extra = d.insert_before(d.first("blob_absent"), with_policy(7))
        d.reforge()
        self.case(
            "policy-unexpected", d, broken("policy_unexpected", 0, d.line(extra)), ["table"],
            "a policy record in a bundle whose entries cite no revision",
            "more policy records than cited revisions: the extra record is about no cited "
            "revision, so no entry: named at 0",
        )  # fmt: skip
        d = s.copy()
        d.set_payload(d.entry(3), {**d.payload(d.entry(3)), "policy_revision": 9})
        d.set_payload(d.entry(5), {**d.payload(d.entry(5)), "policy_revision": 7})
        seven = d.insert_before(d.first("blob_absent"), with_policy(7))
        d.insert_after(seven, with_policy(9))
        d.reforge()
        self.case(
            "valid-policy-revisions-cited", d, valid(), ["N17", "File layout"],
            "entry 3 cites revision 9 and entry 5 revision 7; policy records 7 then 9",
            "one policy record per cited revision, ascending (not in citing order)",
        )  # fmt: skip
        d = s.copy()
        d.set_payload(d.entry(3), {**d.payload(d.entry(3)), "policy_revision": 9})
        d.set_payload(d.entry(5), {**d.payload(d.entry(5)), "policy_revision": 7})
        nine = d.insert_before(d.first("blob_absent"), with_policy(9))
        d.insert_after(nine, with_policy(7))
        d.reforge()
        self.case(
            "policy-missing-not-ascending", d, broken("policy_missing", 5, d.line(nine)),
            ["N17", "File layout"],
            "entry 3 cites revision 9 and entry 5 revision 7; policy records 9 then 7",
            "the first policy line must be the lowest cited revision, 7; it is named at 7's "
            "first citing sequence, 5 (N17)",
        )  # fmt: skip
        d = s.copy()
        d.set_payload(d.entry(3), {**d.payload(d.entry(3)), "policy_revision": True})
        d.set_payload(d.entry(4), {**d.payload(d.entry(4)), "policy_revision": "7"})
        d.set_payload(d.entry(5), {**d.payload(d.entry(5)), "nested": {"policy_revision": 7}})
        d.reforge()
        self.case(
            "valid-policy-revision-not-cited", d, valid(), ["N17", "N5"],
            "entries cite policy_revision true, \"7\" and (nested) 7",
            "N17: only an integer top-level policy_revision is cited (true is not an integer): "
            "no policy record is expected",
        )  # fmt: skip

    def admissions(self) -> None:
        a = self.admitted
        settlement = a.entry_where("migration_settlement")
        at = int(settlement["sequence"])
        d = a.copy()
        cut = d.index(d.entry(at)) + 1
        del d.records[cut : d.after_journal() - 1]
        d.reforge()
        self.case(
            "settlement-without-claim-at-end", d,
            broken("settlement_without_claim", at, d.after_journal()), ["N14", "N15", "table"],
            "the journal cut after the migration settlement (the manifest's head is the "
            "settlement)",
            f"N14/N15: a settlement ending the journal is settlement_without_claim, named at "
            f"{at}, found at the end of the journal, before head_unsigned (the settlement has "
            f"no signature of its own either)",
        )  # fmt: skip
        d = a.copy()
        cut = d.index(d.entry(at)) + 1
        head = json.loads(json.dumps(d.first("manifest")["head"]))
        del d.records[cut : d.after_journal() - 1]
        d.reforge()
        d.first("manifest")["head"] = head
        self.case(
            "order-head-mismatch-before-settlement-without-claim", d,
            broken("head_mismatch", head["sequence"], d.after_journal()), ["N15"],
            "the journal cut after the settlement; the manifest's head still the original one",
            f"N15: head_mismatch (named at the larger sequence, {head['sequence']}) is found "
            f"before settlement_without_claim",
        )  # fmt: skip
        d = a.copy()
        settled = d.entry(at)
        own = json.loads(json.dumps(d.head(at + 1)))
        own["sequence"] = at
        d.insert_after(settled, own)
        claim = d.entry(at + 1)
        d.set_payload(claim, {**d.payload(claim), "request_id": "req-2"})
        d.reforge()
        self.case(
            "settlement-without-claim-other-request", d,
            broken("settlement_without_claim", at, d.line(claim)), ["N14", "table"],
            "the settlement carries its own signed head; the ownership claim after it names "
            "request req-2 (reforged)",
            f"N14: the claim after the settlement is for another request_id: named at the "
            f"settlement, {at}, found when the next entry arrives (its line)",
        )  # fmt: skip
        d = a.copy()
        settled = d.entry(at)
        own = json.loads(json.dumps(d.head(at + 1)))
        own["sequence"] = at
        d.insert_after(settled, own)
        d.set_payload(settled, {**d.payload(settled), "request_id": None})
        claim = d.entry(at + 1)
        payload = d.payload(claim)
        del payload["request_id"]
        d.set_payload(claim, payload)
        d.reforge()
        self.case(
            "settlement-without-claim-request-id-null", d,
            broken("settlement_without_claim", at, d.line(claim)), ["N14"],
            "the settlement (with its own signed head) has request_id null; the claim after it "
            "has no request_id (reforged)",
            "N14: request_ids are compared as JSON values; null is a value, absent is not, so "
            "they differ (only both absent count as equal)",
        )  # fmt: skip
        d = a.copy()
        for entry in (d.entry(at), d.entry(at + 1)):
            payload = d.payload(entry)
            del payload["request_id"]
            d.set_payload(entry, payload)
        d.reforge()
        self.case(
            "admission-mismatch-request-ids-absent", d,
            broken("admission_mismatch", at, d.line(d.first("admission"))), ["N14", "table"],
            "neither the settlement nor its claim has a request_id (reforged); the ticket says "
            "req-1",
            "N14: both absent count as equal, so the claim follows its settlement; the ticket's "
            "request_id then differs from the settlement's: admission_mismatch at the "
            "settlement",
        )  # fmt: skip

    def tickets(self) -> None:
        a, s = self.admitted, self.small
        at = int(a.entry_where("migration_settlement")["sequence"])
        settlement = a.entry_where("migration_settlement")
        d = a.copy()
        absent = {"type": "admission_absent", "request_id": d.first("admission")["request_id"]}
        d.records[d.index(d.first("admission"))] = absent
        self.case(
            "admission-missing-absent-record", d, broken("admission_missing", at, d.line(absent)),
            ["N19"], "the ticket record replaced by admission_absent",
            "N19: admission_absent is a break, admission_missing at its settlement's sequence",
        )  # fmt: skip
        d = a.copy()
        d.remove(d.first("admission"))
        self.case(
            "admission-missing-dropped", d,
            broken("admission_missing", at, d.line(d.first("blob_absent"))), ["N19", "N2"],
            "the ticket record removed",
            "N19: a settlement with no admission record is admission_missing, found at the end "
            "of the admission section (N2: the first blob line)",
        )  # fmt: skip
        d = s.copy()
        extra = d.insert_before(
            d.first("blob_absent"), json.loads(json.dumps(a.first("admission")))
        )
        self.case(
            "admission-unexpected", d, broken("admission_unexpected", 0, d.line(extra)),
            ["table"], "a ticket record in a bundle with no settlement",
            "more admission records than settlements: the extra record is about no settlement, "
            "so no entry: named at 0",
        )  # fmt: skip
        mismatches: list[tuple[str, Callable[[Record], None], str, str]] = [
            ("operator", lambda r: r.update(operator_identity="mallory"),
             "the ticket's operator_identity is mallory", "operator_identity is the "
             "settlement's actor"),
            ("journal-digest", lambda r: r["digests"].update(journal_digest=settlement["hash"]),
             "the ticket's journal_digest is the settlement's own hash",
             "journal_digest is the settlement's prev_hash (the head the candidate was "
             "computed at)"),
            ("execution-request", lambda r: r.update(execution_request_id="exr_0"),
             "the ticket's execution_request_id is another one",
             "execution_request_id is the claim's"),
        ]  # fmt: skip
        for label, change, what, rule in mismatches:
            d = a.copy()
            change(d.first("admission"))
            self.case(
                f"admission-mismatch-{label}", d,
                broken("admission_mismatch", at, d.line(d.first("admission"))), ["table"], what,
                f"{rule}: admission_mismatch at the settlement, {at}",
            )  # fmt: skip
        d = a.copy()
        settled = d.entry(at)
        d.set_payload(settled, {**d.payload(settled), "version": True})
        d.reforge()
        self.case(
            "admission-mismatch-version-true", d,
            broken("admission_mismatch", at, d.line(d.first("admission"))), ["N19"],
            "the settlement's version is true (reforged); the ticket's is the integer",
            f"N19: compared as JSON values, true is not 1: admission_mismatch at {at}",
        )  # fmt: skip
        d = a.copy()
        del d.first("admission")["digests"]["candidate_digest"]
        self.case(
            "record-invalid-ticket-digest-absent", d,
            broken("record_invalid", at, d.line(d.first("admission"))), ["N19", "N5"],
            "the ticket's digests lack candidate_digest",
            f"N19: every member of an admission record is required (N5): record_invalid, named "
            f"at its settlement, {at}",
        )  # fmt: skip
        d = a.copy()
        claim = d.entry(at + 1)
        claim["kind"] = "startup_recovery_annotation"
        d.reforge()
        self.case(
            "settlement-without-claim-not-a-claim", d,
            broken("settlement_without_claim", at, d.line(claim)), ["N13", "N14"],
            "the entry after the settlement (which has no signed head of its own) is no "
            "ownership claim (reforged)",
            f"N13: the entry after a settlement covers it, so no head_unsigned; N14: it is not "
            f"the claim: settlement_without_claim at {at}, on that entry's line",
        )  # fmt: skip

    def blobs(self) -> None:
        s = self.small
        checkpoint, response = s.all("blob")
        d = s.copy()
        d.remove(d.blob(checkpoint["digest"]))
        self.case(
            "blob-omitted", d, broken("blob_omitted", 2, d.line(d.blob(response["digest"]))),
            ["table"], "the checkpoint's blob record removed",
            "the second blob line should be the second referenced digest (the checkpoint, first "
            "named by entry 2): blob_omitted named at 2, on the line that holds another digest",
        )  # fmt: skip
        d = s.copy()
        first, second = d.blob(checkpoint["digest"]), d.blob(response["digest"])
        i, j = d.index(first), d.index(second)
        d.records[i], d.records[j] = second, first
        self.case(
            "blob-omitted-out-of-order", d, broken("blob_omitted", 2, d.line(second)),
            ["table", "File layout"], "the two blob records swapped",
            "blobs come in order of first reference: the line where the checkpoint belongs "
            "holds the response: blob_omitted at 2",
        )  # fmt: skip
        d = s.copy()
        d.remove(d.blob(response["digest"]))
        self.case(
            "blob-omitted-last", d, broken("blob_omitted", 5, d.line(d.first("trailer"))),
            ["table", "N2"], "the last blob record removed",
            "the response, first named by entry 5, has no record: found at the end of the blob "
            "section (N2: the trailer's line)",
        )  # fmt: skip
        d = s.copy()
        content = b"a blob no entry names"
        extra = d.insert_before(d.first("trailer"), {
            "type": "blob", "digest": sha256_digest(content),
            "content": base64.b64encode(content).decode(),
        })  # fmt: skip
        self.case(
            "blob-unexpected", d, broken("blob_unexpected", 0, d.line(extra)), ["table"],
            "a blob record no entry references, after the others",
            "more blob records than referenced digests: the extra record is about no reference, "
            "so no entry: named at 0",
        )  # fmt: skip
        d = s.copy()
        blob = d.blob(checkpoint["digest"])
        blob["content"] = base64.b64encode(b"other bytes").decode()
        self.case(
            "blob-mismatch", d, broken("blob_mismatch", 2, d.line(blob)), ["table"],
            "the checkpoint blob's content replaced",
            "a blob's content must hash to its digest: named at its first referencing sequence",
        )  # fmt: skip
        d = s.copy()
        blob = d.blob(checkpoint["digest"])
        blob["content"] = "not base64!"
        self.case(
            "record-invalid-blob-content", d, broken("record_invalid", 2, d.line(blob)), ["N5"],
            "the checkpoint blob's content is not base64",
            "N5: base64 members are strict RFC 4648; a blob line is named at its digest's first "
            "referencing sequence",
        )  # fmt: skip
        self.add(Vector(
            "blob-missing-required", "bundles/real-small.jsonl",
            broken("blob_missing", 1, s.line(s.first("blob_absent"))), ["table"],
            "the real small run with --require-blobs",
            "blob_absent is a break with --require-blobs: the configuration, first named by "
            "entry 1",
            require_blobs=True,
        ))  # fmt: skip
        self._blob_walk()

    def _blob_walk(self) -> None:
        """N18 in one payload: member order, arrays, retained_results, values that are no
        digest, and UTF-16 order."""
        s = self.small
        d = s.copy()
        e5 = d.entry(5)
        contents = {name: f"blob {name}".encode() for name in "ABCDEPQX"}
        digest = {name: sha256_digest(content) for name, content in contents.items()}
        direct = sha256_digest(b"a digest directly in an array")
        checkpoint = d.payload(d.entry(2))["checkpoint_digest"]
        response = d.payload(e5)["response_digest"]
        payload = {
            "request_id": "model-request-1",
            "response_digest": response,
            "a_list": [direct, {"result_digest": digest["A"]}],
            "checkpoint_digest": checkpoint,
            "deeper": {"retained_results": [{"result_digest": digest["E"]}], "response_digest": 17},
            "retained_results": {
                "r2": digest["B"], "r1": digest["C"], "nested": {"checkpoint_digest": digest["X"]},
                "text": "not a digest",
            },
            "source_checkpoint_digest": "sha256:" + "A" * 64,
            "utf16": {"\ue000": {"result_digest": digest["P"]},
                      "\U0001f600": {"result_digest": digest["Q"]}},
        }  # fmt: skip
        d.set_payload(e5, payload)
        # N18, in canonical member order: a_list (its object's result_digest: A; the digest
        # directly in the array names nothing), checkpoint_digest (already named by entry 2),
        # deeper (retained_results is an array, walked: E; response_digest 17 names nothing),
        # response_digest, retained_results (r1: C, r2: B, nothing inside nested, text no
        # digest), source_checkpoint_digest (upper-case hex: no digest), utf16 (U+1F600 sorts
        # before U+E000 in UTF-16 code units: Q, then P).
        order = [digest["A"], digest["E"], response, digest["C"], digest["B"], digest["Q"],
                 digest["P"]]  # fmt: skip
        by_digest = {v: contents[k] for k, v in digest.items()}
        by_digest[response] = base64.b64decode(d.blob(response)["content"])
        d.remove(d.blob(response))
        anchor = d.first("trailer")
        for named in order:
            d.insert_before(anchor, {
                "type": "blob", "digest": named,
                "content": base64.b64encode(by_digest[named]).decode(),
            })  # fmt: skip
        d.reforge()
        self.case(
            "valid-blob-reference-walk", d, valid(), ["N18"],
            "entry 5's payload names blobs in every way N18 distinguishes; blob records for "
            "exactly the digests N18 collects, in its order",
            "N18: members in canonical (UTF-16) order, depth first; an object's blob-list "
            "members and retained_results' direct digest values name blobs; array items are "
            "walked but a digest directly in an array names nothing; a non-object "
            "retained_results is walked; non-digest values name nothing; each digest once",
        )  # fmt: skip
        d = d.copy()
        d.insert_before(d.first("trailer"), {
            "type": "blob", "digest": direct,
            "content": base64.b64encode(b"a digest directly in an array").decode(),
        })  # fmt: skip
        extra = d.all("blob")[-1]
        self.case(
            "blob-unexpected-digest-in-array", d,
            broken("blob_unexpected", 0, d.line(extra)), ["N18"],
            "the previous vector with a blob record for the digest that stands directly in an "
            "array, after the others",
            "N18: an array item is not a member, so that digest names no blob: the record is "
            "unexpected (named at 0)",
        )  # fmt: skip

    def trailer(self) -> None:
        s = self.small
        trailer_line = s.line(s.first("trailer"))

        def sealed_then(change: Callable[[Record], None]) -> bytes:
            d = s.copy()
            lines = d.lines()
            trailer = d.first("trailer")
            change(trailer)
            lines[-1] = encode(trailer)
            return b"".join(lines)

        where = f"line {trailer_line}: the trailer record"
        self.case(
            "trailer-mismatch-counts", sealed_then(lambda t: t["counts"].update(entries=6)),
            broken("trailer_mismatch", 0, trailer_line), ["table"],
            "the trailer counts 6 entries", "the counts must match what the bundle holds",
            where=where,
        )  # fmt: skip
        self.case(
            "trailer-mismatch-digest",
            sealed_then(lambda t: t.update(bundle_digest=sha256_digest(b""))),
            broken("trailer_mismatch", 0, trailer_line), ["table"],
            "the trailer's bundle_digest is the digest of nothing",
            "bundle_digest is SHA-256 of every byte before the trailer line",
            where=where,
        )  # fmt: skip
        self.case(
            "trailer-mismatch-extra-count",
            sealed_then(lambda t: t["counts"].update(x_later=0)),
            broken("trailer_mismatch", 0, trailer_line), ["N4", "table"],
            "the trailer's counts gain a seventh member",
            "N4: counts holds exactly the six listed counts, so these counts do not match",
            where=where,
        )  # fmt: skip
        d = s.copy()
        d.remove(d.first("trailer"))
        self.case(
            "trailer-missing", d, broken("trailer_missing", 0, len(d.records)), ["N2"],
            "the trailer removed", "N2: trailer_missing is named on the last line read",
        )  # fmt: skip
        self.case(
            "trailer-missing-empty-file", b"", broken("trailer_missing", 0, 0), ["N2"],
            "an empty file", "N2: 0 for an empty file", where="no line was read",
        )  # fmt: skip

    def long_lines(self) -> None:
        """Lines at and past the 24 MiB bound, written by the test from the parts the index
        lists (a committed 24 MiB file would be absurd)."""
        s = self.small
        d = s.copy()
        big_record: Record = {"type": "blob", "digest": "", "x_pad": "", "content": ""}
        # the line's fixed part, then as many "AAAA" groups (3 zero bytes each) as fit exactly
        fixed = len(encode({**big_record, "digest": "sha256:" + "0" * 64})) - 1
        pad = (MAX_LINE_BYTES - fixed) % 4
        big_record["x_pad"] = "z" * pad
        zeros_groups = (MAX_LINE_BYTES - fixed - pad) // 4
        digest = sha256_digest(bytes(3 * zeros_groups))
        big_record["digest"] = digest
        d.set_payload(d.entry(5), {**d.payload(d.entry(5)), "result_digest": digest})
        d.insert_before(d.first("trailer"), big_record)
        d.reforge()
        lines = [encode(record) for record in d.records]
        at = d.index(big_record)
        head, tail = lines[at].split(b'"content":""')
        head += b'"content":"'
        tail = b'"' + tail
        # one byte more than the bound: the line cut there, the bundle with it
        too_long = MAX_LINE_BYTES + 1 - len(head)
        assert len(head) + 4 * zeros_groups + len(tail) - 1 == MAX_LINE_BYTES
        before = b"".join(lines[:at])
        hasher = hashlib.sha256(before + head)
        chunk = b"A" * (4 * 1024 * 1024)
        remaining = 4 * zeros_groups
        while remaining:
            hasher.update(chunk[: min(remaining, len(chunk))])
            remaining -= min(remaining, len(chunk))
        hasher.update(tail)
        trailer = d.first("trailer")
        trailer["counts"] = d.counts()
        trailer["bundle_digest"] = "sha256:" + hasher.hexdigest()
        self.files["bundles/blob-line-at-bound.head"] = before + head
        self.files["bundles/blob-line-at-bound.tail"] = tail + encode(trailer)
        line = at + 1
        self.add(Vector(
            "valid-blob-line-at-bound", "blob-line-at-bound.jsonl", valid(), ["File layout"],
            f"entry 5 also names a blob of {3 * zeros_groups} zero bytes, whose record line is "
            f"exactly {MAX_LINE_BYTES} bytes before its LF (made by the test from the parts)",
            "a line is at most 24 MiB, its LF not counted: this one is read",
            generate=[{"file": "bundles/blob-line-at-bound.head"},
                      {"repeat": "A", "count": 4 * zeros_groups},
                      {"file": "bundles/blob-line-at-bound.tail"}],
        ))  # fmt: skip
        self.add(Vector(
            "line-too-long-blob-line", "blob-line-too-long.jsonl",
            broken("line_too_long", 5, line), ["File layout", "N2"],
            f"the same bundle with one more byte in that line ({MAX_LINE_BYTES + 1} bytes "
            "before its LF); the bundle ends there",
            "a longer line is line_too_long, named without reading the rest of it; the n-th "
            "blob line is named at the n-th referenced digest's first sequence, 5",
            where=f"line {line}: the blob record of the zero bytes, cut past the bound",
            generate=[{"file": "bundles/blob-line-at-bound.head"},
                      {"repeat": "A", "count": too_long}],
        ))  # fmt: skip
        manifest = s.bytes().splitlines(keepends=True)[0]
        start = b'{"type":"run","record":'
        self.files["bundles/run-line-too-long.head"] = manifest + start
        self.add(Vector(
            "line-too-long-run-line", "run-line-too-long.jsonl",
            broken("line_too_long", 0, 2), ["File layout", "N2"],
            "the real small run's manifest, then a run line of 25,165,825 bytes (NUL bytes "
            "after its start) with no LF",
            "line_too_long on line 2; a run line is named at 0",
            where="line 2: the run record, cut past the bound",
            generate=[{"file": "bundles/run-line-too-long.head"},
                      {"repeat": "\u0000", "count": MAX_LINE_BYTES + 1 - len(start)}],
        ))  # fmt: skip

    def usage_errors(self) -> None:
        small = "bundles/real-small.jsonl"
        cases: list[tuple[str, dict[str, Any], list[str], str, str]] = [
            ("usage-no-trusted-key", {"trusted_keys": []}, ["N8", "N20"],
             "the real small run, no --trusted-key and no --trust-bundle-keys",
             "N8/N20: without a trusted key a verifier refuses to run unless told "
             "--trust-bundle-keys: exit 2"),
            ("usage-heads-file-head-not-vouched", {"known_heads": "heads/signed-by-other.jsonl"},
             ["Heads file and the head feed", "N20"],
             "a heads file whose head of the run is signed by a key that is not pinned",
             "with --trusted-key each witnessed head must verify under the pinned keys, else "
             "the file is refused: exit 2"),
            ("usage-heads-file-two-heads-at-one-sequence",
             {"known_heads": "heads/two-at-one-sequence.jsonl"},
             ["Heads file and the head feed", "N20"],
             "a heads file with two validly signed heads at sequence 3 with different hashes",
             "two heads at one sequence with different hashes are refused: exit 2"),
            ("usage-heads-file-not-signed-heads", {"known_heads": "heads/not-signed-heads.jsonl"},
             ["Heads file and the head feed", "N20"], "a heads file whose line is a manifest",
             "every line of a heads file must be a signed_head record: exit 2"),
            ("usage-trusted-key-unreadable", {"trusted_keys": ["keys/not-a-key.txt"]},
             ["N8", "N20"], "a trusted-key file holding no key",
             "N20: an unreadable trusted-key file is a usage error"),
            ("usage-trusted-key-window-not-timestamp",
             {"trusted_keys": ["keys/ledger-window-not-timestamp.signing-keys.json"]},
             ["N9", "N20"], "a pinned signing-keys file whose not_after has no fractional digits",
             "N9: windows are compared as text and must be of the one form; a trusted-key file "
             "that breaks it is unreadable (N20): exit 2"),
            ("usage-bundle-cannot-be-opened", {}, ["N20"],
             "the bundle named does not exist (bundles/absent.jsonl is never written)",
             "N20: a file that cannot be opened: exit 2"),
        ]  # fmt: skip
        for name, options, rules, change, why in cases:
            bundle = "bundles/absent.jsonl" if name == "usage-bundle-cannot-be-opened" else small
            self.add(Vector(name, bundle, usage(), rules, change, why, **options))

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
