"""The bundle checks, one line at a time (docs/formats.md, "Audit bundle", "What the verifier
checks"). Memory holds what later sections are checked against, never the entries themselves:
the referenced blob digests, the cited policy revisions, the admission settlements and the
distinct command ids (at most the run's command limit)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from forge_audit import BUNDLE_FORMAT
from forge_audit.heads import HeadChain, Trust, TrustedKey, is_timestamp
from forge_audit.jcs import GENESIS, JsonRefused, canonical, digest_of, parse, sha256
from forge_audit.records import (
    MAX_LINE_BYTES,
    RUN_MEMBERS,
    Broken,
    Record,
    Report,
    Settlement,
    blob_references,
    guess_type,
    key_id,
    overlong,
)

__all__ = ["BundleVerifier", "Report", "TrustedKey", "key_id"]

# Sections in bundle order; a record of an earlier section after a later one is out of order.
_SECTIONS = {
    "manifest": 0,
    "run": 1,
    "signing_keys": 2,
    "entry": 3,
    "signed_head": 3,
    "policy": 4,
    "admission": 5,
    "admission_absent": 5,
    "blob": 6,
    "blob_absent": 6,
    "trailer": 7,
}
_KNOWN = frozenset(_SECTIONS)
_BOUNDS = ("not_before", "not_after")
# A member a payload does not have (N14: absent equals only absent, never null).
_ABSENT = object()
# Sections of exactly one record.
_SINGLE = {0: "manifest", 1: "run", 2: "signing_keys", 7: "trailer"}


class BundleVerifier:
    """Feed every line in order (``line``), then ``finish``; the first break raises
    :class:`Broken`."""

    def __init__(
        self,
        trusted_keys: Mapping[str, TrustedKey | Ed25519PublicKey] | None = None,
        *,
        trust_bundle_keys: bool = False,
        require_blobs: bool = False,
        allow_unsigned_head: bool = False,
        witnessed: dict[int, str] | None = None,
    ) -> None:
        """``trusted_keys``: the pinned keys every signature must verify under; without them only
        ``trust_bundle_keys`` lets the keys the bundle carries vouch (internal consistency only).
        ``witnessed``: sequence -> head hash a monitor saw for this run (--known-heads)."""
        pinned = {
            found: key if isinstance(key, TrustedKey) else TrustedKey(key)
            for found, key in (trusted_keys or {}).items()
        }
        self._trust = Trust(pinned, trust_bundle_keys)
        self._chain = HeadChain(
            self._trust, dict(witnessed or {}), allow_unsigned=allow_unsigned_head
        )
        self._require_blobs = require_blobs
        self._section = -1
        self._line = 0
        self._hasher = hashlib.sha256()
        self._done = False
        self._counts = dict.fromkeys(
            ("entries", "signed_heads", "policies", "admissions", "blobs", "blobs_absent"), 0
        )
        self.report = Report(trusted_from_bundle=self._trust.from_bundle)
        self._run: dict[str, Any] = {}  # the run record's members
        self._run_digest = ""
        self._prev, self._next_sequence = GENESIS, 1
        self._last_signed = 0
        self._blob_order: list[str] = []
        self._blob_first: dict[str, int] = {}
        self._policy_first: dict[int, int] = {}
        self._policy_order: list[int] = []
        self._policy_digests: dict[int, str] = {}
        self._settlements: list[Settlement] = []
        self._pending_settlement: Settlement | None = None
        self._commands: set[str] = set()
        self._handlers = {
            "manifest": self._manifest,
            "run": self._run_record,
            "signing_keys": self._signing_keys,
            "entry": self._entry,
            "signed_head": self._signed_head,
            "policy": self._policy,
            "admission": self._admission,
            "admission_absent": self._admission_absent,
            "blob": self._blob,
            "blob_absent": self._blob_absent,
            "trailer": self._trailer,
        }
        self._section_end = {
            3: self._end_of_journal,
            4: self._end_of_policies,
            5: self._end_of_admissions,
            6: self._end_of_blobs,
        }

    # --- reading lines -------------------------------------------------------------------------

    def line(self, raw: bytes) -> None:
        self._line += 1
        if self._done:
            raise Broken(0, "trailing_data", "bytes after the trailer", self._line)
        record = self._parse(raw)
        section = _SECTIONS.get(record.type)
        if section is None:
            raise record.broken("record_invalid", f"unknown record type {record.type!r}")
        if section < self._section or (section == self._section and section in _SINGLE):
            raise record.broken("out_of_order", f"{record.type} after a later or the same section")
        if section > self._section:
            self._enter(section, record)
        if record.type != "trailer":
            self._hasher.update(raw)
        self._handlers[record.type](record)

    def _parse(self, raw: bytes) -> Record:
        sequence = self._context_sequence(raw)
        if overlong(raw):
            detail = f"longer than {MAX_LINE_BYTES} bytes"
            raise Broken(sequence, "line_too_long", detail, self._line)
        try:
            members = parse(raw.decode("utf-8"))
        except (UnicodeDecodeError, JsonRefused) as error:
            raise Broken(sequence, "line_unreadable", str(error), self._line) from None
        if not isinstance(members, dict):
            raise Broken(sequence, "line_unreadable", "a line must be a JSON object", self._line)
        record = Record(members, self._line, sequence)
        if record.type == "entry":
            record.sequence = self._next_sequence
        elif record.type == "signed_head":
            record.sequence = self._next_sequence - 1  # it follows the entry it signs
        return record

    def _context_sequence(self, raw: bytes) -> int:
        """The sequence a line is about, known before it is read: an entry is the next one, a
        signed head follows the entry it signs, and the policy, admission and blob sections
        follow the order the entries set, so their n-th line is about the n-th cited revision,
        settlement or referenced blob."""
        kind = guess_type(raw, _KNOWN)
        if kind == "entry":
            return self._next_sequence
        if kind == "signed_head":
            return self._next_sequence - 1
        if kind == "policy":
            order = sorted(self._policy_first)
            index = self._counts["policies"]
            return self._policy_first[order[index]] if index < len(order) else 0
        if kind in ("admission", "admission_absent"):
            index = self._counts["admissions"]
            return self._settlements[index].sequence if index < len(self._settlements) else 0
        if kind in ("blob", "blob_absent"):
            index = self._counts["blobs"] + self._counts["blobs_absent"]
            digests = self._blob_order
            return self._blob_first[digests[index]] if index < len(digests) else 0
        return 0

    def _enter(self, section: int, record: Record) -> None:
        """Leave the current section for ``section``: a skipped single record is missing, and
        every section passed (entered or empty) gets its end-of-section checks."""
        for skipped in range(self._section + 1, section):
            if skipped in _SINGLE:
                # a break of the manifest, run or keys record: named at 0 whatever line finds it
                raise Broken(0, "record_missing", f"no {_SINGLE[skipped]} record", record.line)
        for ended in range(max(self._section, 0), section):
            end = self._section_end.get(ended)
            if end is not None:
                end(record.line)
        self._section = section

    # --- manifest, run, keys -------------------------------------------------------------------

    def _manifest(self, record: Record) -> None:
        if record.text("format") != BUNDLE_FORMAT:
            raise record.broken("format_unknown", f"format is not {BUNDLE_FORMAT}")
        self.report.run_id = record.text("run_id")
        head = record.object("head")
        sequence, hash_ = head.get("sequence"), head.get("hash")
        if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 0:
            raise record.broken("record_invalid", "head.sequence must be a non-negative integer")
        if not isinstance(hash_, str):
            raise record.broken("record_invalid", "head.hash must be a string")
        self.report.head_sequence, self.report.head_hash = sequence, hash_

    def _run_record(self, record: Record) -> None:
        run = record.object("record")
        if sorted(run) != sorted(RUN_MEMBERS):
            raise record.broken("record_invalid", f"run record members must be {RUN_MEMBERS}")
        stated = record.digest("run_digest")
        if digest_of(run) != stated:
            raise record.broken(
                "run_digest_mismatch", "the run record does not hash to its recorded run_digest"
            )
        if run["run_id"] != self.report.run_id:
            raise record.broken("run_mismatch", "the run record is not the manifest's run")
        limit = run["command_limit"]
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise record.broken("record_invalid", "command_limit must be an integer")
        self._run, self._run_digest = run, stated

    def _signing_keys(self, record: Record) -> None:
        keys = record.members.get("keys")
        if not isinstance(keys, list):
            raise record.broken("record_invalid", "keys must be a list")
        for item in keys:
            key = Record(item if isinstance(item, dict) else {}, record.line, 0)
            if key.text("algorithm") != "ed25519":
                raise record.broken("signing_key_invalid", "only ed25519 keys are known")
            raw = key.base64("public_key")
            stated = key.digest("key_id")
            if len(raw) != 32 or key_id(raw) != stated:
                raise record.broken("signing_key_invalid", f"{stated} is not its key's digest")
            window = [item.get(bound) if isinstance(item, dict) else None for bound in _BOUNDS]
            if not all(bound is None or is_timestamp(bound) for bound in window):
                raise record.broken("signing_key_invalid", f"{stated}: a bound is no timestamp")
            self._trust.published[stated] = TrustedKey(
                Ed25519PublicKey.from_public_bytes(raw), *window
            )

    # --- the journal ---------------------------------------------------------------------------

    def _entry(self, record: Record) -> None:
        sequence = record.integer("sequence")
        if sequence != self._next_sequence:
            raise Broken(self._next_sequence, "sequence_gap", f"found {sequence}", record.line)
        if record.text("run_id") != self.report.run_id:
            raise record.broken("run_mismatch", "the entry is not the manifest's run")
        prev_hash = record.text("prev_hash")
        if prev_hash != self._prev:
            raise record.broken("link_mismatch", "prev_hash is not the previous entry's hash")
        payload_json = record.text("payload_json")
        try:
            payload = parse(payload_json)
            if canonical(payload).decode("utf-8") != payload_json:
                raise JsonRefused("not RFC 8785 canonical")
        except JsonRefused as error:
            raise record.broken("payload_not_canonical", str(error)) from None
        envelope = {
            "run_id": record.text("run_id"),
            "sequence": sequence,
            "kind": record.text("kind"),
            "payload": payload,
            "prev_hash": prev_hash,
            "actor": record.text("actor"),
            "recorded_at": record.text("recorded_at"),
        }
        hash_ = record.text("hash")
        if digest_of(envelope) != hash_:
            raise record.broken("hash_mismatch", "the envelope does not hash to its recorded hash")
        self._chain.entry(
            sequence, hash_, settlement=envelope["kind"] == "migration_settlement", line=record.line
        )
        self._prev, self._next_sequence = hash_, sequence + 1
        self._counts["entries"] += 1
        self._entry_facts(record, envelope["kind"], payload)

    def _entry_facts(self, record: Record, kind: str, payload: Any) -> None:
        """What later sections are checked against, and the per-entry rules. A payload that is
        no object names blobs all the same (N18) and has no members (N14, N16, N17)."""
        sequence = record.sequence
        for digest in blob_references(payload):
            if digest not in self._blob_first:
                self._blob_first[digest] = sequence
                self._blob_order.append(digest)
        members: dict[str, Any] = payload if isinstance(payload, dict) else {}
        revision = members.get("policy_revision")
        if isinstance(revision, int) and not isinstance(revision, bool):
            self._policy_first.setdefault(revision, sequence)
        pending, self._pending_settlement = self._pending_settlement, None
        if pending is not None:
            # the ownership claim is adjacent to its settlement, for the same request (compared
            # as JSON values: absent equals only absent)
            same = members.get("request_id", _ABSENT) == pending.payload.get("request_id", _ABSENT)
            if kind != "ownership_claim" or not same:
                raise Broken(
                    pending.sequence,
                    "settlement_without_claim",
                    "a migration settlement is not followed by its ownership claim",
                    record.line,
                )
            pending.claim = members
        if kind == "migration_settlement":
            settlement = Settlement(
                sequence, record.text("prev_hash"), record.text("actor"), members
            )
            self._settlements.append(settlement)
            self._pending_settlement = settlement
        if kind == "command_executed":
            self._receipt(record, members)

    def _receipt(self, record: Record, payload: dict[str, Any]) -> None:
        """The command ledger at this receipt: each id charged once, never above the limit."""
        command_id = payload.get("command_id")
        if not isinstance(command_id, str):
            raise record.broken("command_receipt_invalid", "command_id must be a string")
        if command_id in self._commands:
            raise record.broken("command_charged_twice", f"command {command_id} is already charged")
        self._commands.add(command_id)
        limit = int(self._run["command_limit"])
        if len(self._commands) > limit:
            raise record.broken(
                "command_limit_exceeded", f"{len(self._commands)} commands of a limit of {limit}"
            )

    def _signed_head(self, record: Record) -> None:
        sequence = record.integer("sequence")
        if sequence != self._next_sequence - 1 or sequence <= self._last_signed:
            raise record.broken("signature_misplaced", "a signed head follows its own entry")
        if record.text("run_id") != self.report.run_id or record.text("head_hash") != self._prev:
            raise record.broken(
                "signed_head_mismatch", "the signed head is not this entry's hash: history changed"
            )
        head = self._chain.signed(record)
        self._last_signed = sequence
        self._counts["signed_heads"] += 1
        if sequence == self.report.head_sequence:
            self.report.head_key_id = head.key_id

    def _end_of_journal(self, line: int) -> None:
        head_sequence, head_hash = self.report.head_sequence, self.report.head_hash
        last = self._next_sequence - 1
        if last != head_sequence or self._prev != head_hash:
            raise Broken(
                max(last, head_sequence),
                "head_mismatch",
                f"the journal ends at {last}, the manifest's head is {head_sequence}",
                line,
            )
        if self._pending_settlement is not None:
            raise Broken(
                self._pending_settlement.sequence,
                "settlement_without_claim",
                "the journal ends after a migration settlement",
                line,
            )
        self._chain.end(last, line)
        self.report.entries = last
        self.report.commands = len(self._commands)
        self.report.unsigned_heads_accepted = self._chain.unsigned_accepted
        self.report.witnessed_heads = self._chain.witnessed
        self._policy_order = sorted(self._policy_first)

    # --- policies, admissions, blobs -----------------------------------------------------------

    def _policy(self, record: Record) -> None:
        index = self._counts["policies"]
        if index >= len(self._policy_order):
            raise record.broken("policy_unexpected", "more policy records than cited revisions")
        expected = self._policy_order[index]
        revision = record.integer("revision")
        if revision != expected:
            raise record.broken("policy_missing", f"revision {expected} is cited, not {revision}")
        settings = record.object("settings")
        if "revision" in settings:
            raise record.broken("record_invalid", "settings must not hold revision")
        stated = record.digest("digest")
        if digest_of({"revision": revision, **settings}) != stated:
            raise record.broken("policy_digest_mismatch", f"revision {revision} does not hash")
        self._policy_digests[revision] = stated
        self._counts["policies"] += 1

    def _end_of_policies(self, line: int) -> None:
        index = self._counts["policies"]
        if index < len(self._policy_order):
            revision = self._policy_order[index]
            raise Broken(
                self._policy_first[revision], "policy_missing", f"revision {revision}", line
            )
        self.report.policies = index

    def _next_settlement(self, record: Record) -> Settlement:
        index = self._counts["admissions"]
        if index >= len(self._settlements):
            raise record.broken("admission_unexpected", "more admissions than settlements")
        self._counts["admissions"] += 1
        return self._settlements[index]

    def _admission_absent(self, record: Record) -> None:
        settlement = self._next_settlement(record)
        raise Broken(
            settlement.sequence, "admission_missing", "the ledger has no ticket", record.line
        )

    def _admission(self, record: Record) -> None:
        settlement = self._next_settlement(record)
        payload, claim = settlement.payload, settlement.claim or {}
        digests = Record(record.object("digests"), record.line, record.sequence)
        revision = record.integer("policy_revision")
        expected = {
            "request_id": (record.text("request_id"), payload.get("request_id")),
            "operator_identity": (record.text("operator_identity"), settlement.actor),
            "settlement_sequence": (record.integer("settlement_sequence"), settlement.sequence),
            "claim_sequence": (record.integer("claim_sequence"), settlement.sequence + 1),
            "candidate_digest": (digests.text("candidate_digest"), payload.get("candidate_digest")),
            "run_digest": (digests.text("run_digest"), self._run_digest),
            "journal_digest": (digests.text("journal_digest"), settlement.prev_hash),
            "policy_revision": (revision, payload.get("policy_revision")),
            "policy_digest": (digests.text("policy_digest"), self._policy_digests.get(revision)),
            "version": (record.integer("version"), payload.get("version")),
            "derived_checkpoint_digest": (
                record.text("derived_checkpoint_digest"),
                payload.get("derived_checkpoint_digest"),
            ),
            "execution_request_id": (
                record.text("execution_request_id"),
                claim.get("execution_request_id"),
            ),
        }
        for name, (recorded, recomputed) in expected.items():
            # JSON values: a member the settlement lacks, or `true` for 1, is no match
            if type(recorded) is not type(recomputed) or recorded != recomputed:
                raise Broken(
                    settlement.sequence,
                    "admission_mismatch",
                    f"the ticket's {name} is not what the bundle recomputes",
                    record.line,
                )

    def _end_of_admissions(self, line: int) -> None:
        index = self._counts["admissions"]
        if index < len(self._settlements):
            raise Broken(
                self._settlements[index].sequence, "admission_missing", "no ticket record", line
            )
        self.report.admissions = index

    def _next_blob(self, record: Record) -> str:
        index = self._counts["blobs"] + self._counts["blobs_absent"]
        if index >= len(self._blob_order):
            raise record.broken("blob_unexpected", "more blob records than referenced digests")
        expected = self._blob_order[index]
        if record.text("digest") != expected:
            raise record.broken("blob_omitted", f"{expected} is referenced and not in the bundle")
        return expected

    def _blob(self, record: Record) -> None:
        digest = self._next_blob(record)
        if sha256(record.base64("content")) != digest:
            raise record.broken("blob_mismatch", f"the content is not {digest}")
        self._counts["blobs"] += 1

    def _blob_absent(self, record: Record) -> None:
        digest = self._next_blob(record)
        if self._require_blobs:
            raise record.broken("blob_missing", f"the ledger does not store {digest}")
        self.report.blobs_absent.append(digest)
        self._counts["blobs_absent"] += 1

    def _end_of_blobs(self, line: int) -> None:
        index = self._counts["blobs"] + self._counts["blobs_absent"]
        if index < len(self._blob_order):
            digest = self._blob_order[index]
            raise Broken(self._blob_first[digest], "blob_omitted", digest, line)
        self.report.blobs = self._counts["blobs"]

    # --- trailer -------------------------------------------------------------------------------

    def _trailer(self, record: Record) -> None:
        counts = record.object("counts")
        if counts != self._counts:
            raise record.broken("trailer_mismatch", f"counts {counts} != {self._counts}")
        if record.text("bundle_digest") != "sha256:" + self._hasher.hexdigest():
            raise record.broken("trailer_mismatch", "the lines before the trailer do not hash")
        self._done = True

    def finish(self) -> Report:
        if not self._done:
            raise Broken(0, "trailer_missing", "the bundle ends before its trailer", self._line)
        self.report.signed_heads = self._counts["signed_heads"]
        return self.report
