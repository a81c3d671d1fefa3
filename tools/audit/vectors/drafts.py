"""Editing a bundle one rule at a time (the conformance vectors' hand-built cases).

A :class:`Draft` holds a bundle's records in order. ``reforge`` makes it consistent with itself
again after an edit, as a forger with the signing key would: every entry's ``prev_hash`` and
``hash`` (digests of earlier entries quoted in later payloads follow), each signed head's
``head_hash``, ``previous`` and signature, the run and policy digests, each ticket's
``journal_digest``, ``run_digest`` and ``policy_digest``, and the manifest's head. The one break a
vector is about is made after that, and ``lines`` seals the trailer (counts and
``bundle_digest``) over whatever bytes the bundle then has, so nothing but that break is wrong.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.ledger.domain.signing import (
    SIGNED_HEAD_FORMAT,
    SIGNED_HEAD_FORMAT_V1,
    PreviousHead,
    key_id_of,
    raw_public_key,
    statement,
)
from shared.continuity.canonical import digest_of, parse_json, sha256_digest

Record = dict[str, Any]
GENESIS = "sha256:" + "0" * 64
COUNTED = {
    "entry": "entries",
    "signed_head": "signed_heads",
    "policy": "policies",
    "admission": "admissions",
    "admission_absent": "admissions",
    "blob": "blobs",
    "blob_absent": "blobs_absent",
}
JOURNAL = ("entry", "signed_head")


def encode(record: Record) -> bytes:
    """One line as the exporter writes it: compact ASCII JSON, members in their order."""
    return json.dumps(record, separators=(",", ":")).encode("ascii") + b"\n"


def key_record(key: Ed25519PrivateKey, **window: str | None) -> Record:
    raw = raw_public_key(key.public_key())
    return {
        "key_id": key_id_of(raw),
        "algorithm": "ed25519",
        "public_key": base64.b64encode(raw).decode("ascii"),
        "not_before": window.get("not_before"),
        "not_after": window.get("not_after"),
    }


def key_id(key: Ed25519PrivateKey) -> str:
    return key_id_of(raw_public_key(key.public_key()))


def signature_digest(record: Record) -> str:
    return sha256_digest(base64.b64decode(record["signature"]))


def as_previous(record: Record) -> Record:
    return {
        "sequence": record["sequence"],
        "head_hash": record["head_hash"],
        "signature_digest": signature_digest(record),
    }


def sign(record: Record, keys: Mapping[str, Ed25519PrivateKey]) -> None:
    """Sign a signed_head record over its members as they are (a record without ``format`` is
    ``/1``, which covers neither ``previous`` nor ``unsigned_through``)."""
    head_format = record.get("format", SIGNED_HEAD_FORMAT_V1)
    previous = record.get("previous") if head_format == SIGNED_HEAD_FORMAT else None
    signed = statement(
        record["run_id"],
        record["sequence"],
        record["head_hash"],
        record["signed_at"],
        record["key_id"],
        previous=None if previous is None else PreviousHead(**previous),
        unsigned_through=record.get("unsigned_through", 0),
        format=head_format,
    )
    record["signature"] = base64.b64encode(keys[record["key_id"]].sign(signed)).decode("ascii")


def envelope_hash(entry: Record) -> str:
    members = ("run_id", "sequence", "kind", "prev_hash", "actor", "recorded_at")
    envelope = {name: entry[name] for name in members}
    return digest_of({**envelope, "payload": parse_json(entry["payload_json"])})


class Draft:
    """A bundle's records, edited in place."""

    def __init__(self, records: list[Record], keys: Mapping[str, Ed25519PrivateKey]) -> None:
        self.records = copy.deepcopy(records)
        self.keys = keys

    @classmethod
    def of(cls, bundle: bytes, keys: Mapping[str, Ed25519PrivateKey]) -> Draft:
        return cls([json.loads(line) for line in bundle.splitlines()], keys)

    def copy(self) -> Draft:
        return Draft(self.records, self.keys)

    # --- finding records -----------------------------------------------------------------------

    def all(self, kind: str) -> list[Record]:
        return [record for record in self.records if record.get("type") == kind]

    def first(self, kind: str) -> Record:
        return self.all(kind)[0]

    def entry(self, sequence: int) -> Record:
        return next(r for r in self.all("entry") if r["sequence"] == sequence)

    def head(self, sequence: int) -> Record:
        return next(r for r in self.all("signed_head") if r["sequence"] == sequence)

    def entry_where(self, kind: str) -> Record:
        return next(r for r in self.all("entry") if r["kind"] == kind)

    def blob(self, digest: str) -> Record:
        return next(
            r
            for r in self.records
            if r.get("type") in ("blob", "blob_absent") and r["digest"] == digest
        )

    def index(self, record: Record) -> int:
        return next(n for n, found in enumerate(self.records) if found is record)

    def line(self, record: Record) -> int:
        """The bundle line (from 1) ``record`` is on."""
        return self.index(record) + 1

    def after_journal(self) -> int:
        """The line of the first record after the journal (N2: where an end-of-journal break is
        found)."""
        last = max(n for n, r in enumerate(self.records) if r.get("type") in JOURNAL)
        return last + 2

    def after(self, kinds: tuple[str, ...]) -> int:
        """The line of the first record after the last record of ``kinds``."""
        last = max(n for n, r in enumerate(self.records) if r.get("type") in kinds)
        return last + 2

    def payload(self, entry: Record) -> Any:
        return json.loads(entry["payload_json"])

    def set_payload(self, entry: Record, payload: Any) -> None:
        """Canonical payload text (RFC 8785), as the ledger stores it."""
        from shared.continuity.canonical import canonical_text

        entry["payload_json"] = canonical_text(payload)

    # --- editing -------------------------------------------------------------------------------

    def remove(self, *records: Record) -> Draft:
        for record in records:
            del self.records[self.index(record)]
        return self

    def insert_after(self, anchor: Record, record: Record) -> Record:
        self.records.insert(self.index(anchor) + 1, record)
        return record

    def insert_before(self, anchor: Record, record: Record) -> Record:
        self.records.insert(self.index(anchor), record)
        return record

    def edit(self, change: Callable[[Draft], object]) -> Draft:
        change(self)
        return self

    # --- consistency ---------------------------------------------------------------------------

    def reforge(self) -> Draft:
        """Make every derived value consistent with the records as they now are."""
        renamed: dict[str, str] = {}
        prev = GENESIS
        last_entry: Record | None = None
        last_signed: Record | None = None
        policy_digests: dict[int, str] = {}
        run_digest = ""
        for record in self.records:
            kind = record.get("type")
            if kind == "run":
                run_digest = record["run_digest"] = digest_of(record["record"])
            elif kind == "entry":
                text = record["payload_json"]
                for old, new in renamed.items():
                    text = text.replace(old, new)
                record["payload_json"] = text
                record["prev_hash"] = prev
                old_hash, record["hash"] = record["hash"], envelope_hash(record)
                renamed[old_hash] = record["hash"]
                prev, last_entry = record["hash"], record
            elif kind == "signed_head":
                if last_entry is not None and last_entry["sequence"] == record["sequence"]:
                    record["head_hash"] = last_entry["hash"]
                if record.get("format", SIGNED_HEAD_FORMAT_V1) == SIGNED_HEAD_FORMAT:
                    record["previous"] = None if last_signed is None else as_previous(last_signed)
                sign(record, self.keys)
                last_signed = record
            elif kind == "policy":
                record["digest"] = digest_of({"revision": record["revision"], **record["settings"]})
                policy_digests[record["revision"]] = record["digest"]
            elif kind == "admission":
                settlement = self.entry(record["settlement_sequence"])
                digests = record["digests"]
                digests["journal_digest"] = settlement["prev_hash"]
                digests["run_digest"] = run_digest
                digests["policy_digest"] = policy_digests.get(
                    record["policy_revision"], digests["policy_digest"]
                )
        manifest = self.first("manifest")
        manifest["head"] = {
            "sequence": 0 if last_entry is None else last_entry["sequence"],
            "hash": prev,
        }
        return self

    def rename_digest(self, old: str, new: str) -> None:
        """Replace a digest everywhere it is quoted: payloads, tickets and blob records."""
        for record in self.records:
            if record.get("type") == "entry":
                record["payload_json"] = record["payload_json"].replace(old, new)
            elif record.get("type") in ("blob", "blob_absent") and record["digest"] == old:
                record["digest"] = new
            elif record.get("type") == "admission" and record["derived_checkpoint_digest"] == old:
                record["derived_checkpoint_digest"] = new

    # --- bytes ---------------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(
            ("entries", "signed_heads", "policies", "admissions", "blobs", "blobs_absent"), 0
        )
        for record in self.records:
            counted = COUNTED.get(record.get("type"))  # type: ignore[arg-type]
            if counted:
                counts[counted] += 1
        return counts

    def lines(
        self,
        raw: Callable[[list[bytes]], object] | None = None,
        *,
        seal: bool = True,
        encoder: Callable[[Record], bytes] = encode,
    ) -> list[bytes]:
        """The bundle's lines; ``raw`` edits their bytes (lines stay where they are), then the
        trailer is sealed over the bytes before it (unless ``seal`` is false)."""
        lines = [encoder(record) for record in self.records]
        if raw is not None:
            raw(lines)
        if seal:
            trailers = [n for n, r in enumerate(self.records) if r.get("type") == "trailer"]
            if trailers:
                at = trailers[-1]
                trailer = self.records[at]
                trailer["counts"] = self.counts()
                trailer["bundle_digest"] = sha256_digest(b"".join(lines[:at]))
                lines[at] = encoder(trailer)
        return lines

    def bytes(
        self, raw: Callable[[list[bytes]], object] | None = None, *, seal: bool = True
    ) -> bytes:
        return b"".join(self.lines(raw, seal=seal))


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
