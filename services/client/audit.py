"""``journal export``: one self-describing audit bundle of a run, written from the ledger's public
read RPCs (docs/formats.md, "Audit bundle"; ADR 0015) for ``forge-continuity-verify`` to check
offline.

The bundle is written as it is read: the journal arrives on one ``StreamJournal`` stream (resumed
where it stopped if a deadline cuts it), each signed head right after its entry, then the cited
policy revisions, the admissions' tickets and every blob the entries name, one ``GetBlob`` at a
time. Memory holds what the later sections need (the referenced blob digests, the cited policy
revisions, the settlements' request ids), never the entries.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import IO, Any

from google.protobuf.timestamp_pb2 import Timestamp

from forge.continuity.v1 import audit_pb2, common_pb2, ledger_pb2, policy_pb2
from services.client._base import ClientBase, invoke
from services.client._validation import check_identifiers
from shared.continuity.blob_references import blob_references
from shared.continuity.canonical import parse_json
from shared.continuity.timeutil import to_text, utc_now
from shared.contract.terms import enum_short_name
from shared.runtime.client import stream
from shared.runtime.errors import DeadlineExceeded, NotFound, Unavailable

BUNDLE_FORMAT = "forge.continuity.audit-bundle/1"
SIGNED_HEAD_FORMAT = "forge.continuity.signed-head/2"
SIGNED_HEAD_FORMAT_V1 = "forge.continuity.signed-head/1"
_RUN_MEMBERS = (
    "run_id",
    "task_id",
    "attempt_id",
    "source_revision",
    "configuration_digest",
    "provider_timeout_seconds",
    "command_limit",
    "time_budget_protocol",
    "source_profile",
)
_POLICY_RECORD_FIELDS = frozenset({"revision", "updated_by", "updated_at", "digest"})
_SIGNED_HEAD_PAGE = 500
# Entries a StreamJournal message carries (the ledger reads its journal 200 rows a page).
_STREAM_BATCH = 200


def _text(stamp: Timestamp) -> str:
    return to_text(stamp.ToDatetime(tzinfo=UTC))


@dataclass
class ExportSummary:
    """What was written."""

    run_id: str
    path: str
    head_sequence: int
    head_hash: str
    counts: dict[str, int] = field(default_factory=dict)
    bundle_digest: str = ""


class _BundleWriter:
    """JSON lines (ASCII, compact, ``type`` first), each hashed into the trailer's digest."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._hasher = hashlib.sha256()
        self.counts = dict.fromkeys(
            ("entries", "signed_heads", "policies", "admissions", "blobs", "blobs_absent"), 0
        )

    def write(self, kind: str, members: dict[str, Any], count: str = "") -> None:
        line = json.dumps({"type": kind, **members}, separators=(",", ":")).encode("ascii")
        self._out.write(line + b"\n")
        self._hasher.update(line + b"\n")
        if count:
            self.counts[count] += 1

    def trailer(self) -> str:
        digest = "sha256:" + self._hasher.hexdigest()
        line = {"type": "trailer", "counts": self.counts, "bundle_digest": digest}
        self._out.write(json.dumps(line, separators=(",", ":")).encode("ascii") + b"\n")
        return digest


class AuditCalls(ClientBase):
    """The audit bundle export and the reads it is made of."""

    def signing_keys(self) -> list[audit_pb2.SigningKey]:
        """Every published head-signing key (the current one first)."""
        return list(invoke(self._ledger.GetSigningKeys, audit_pb2.GetSigningKeysRequest()).keys)

    def signed_heads(self, run_id: str, from_sequence: int = 1) -> Iterator[audit_pb2.SignedHead]:
        """The run's signed heads from ``from_sequence`` on, in sequence order (page by page)."""
        check_identifiers(run_id=run_id)
        sequence = from_sequence
        while sequence:
            page = invoke(
                self._ledger.ListSignedHeads,
                audit_pb2.ListSignedHeadsRequest(
                    run_id=run_id, from_sequence=sequence, page_size=_SIGNED_HEAD_PAGE
                ),
            )
            yield from page.signed_heads
            sequence = page.next_sequence

    def _entries(self, run_id: str, up_to: int) -> Iterator[common_pb2.JournalEntry]:
        """Entries 1..``up_to`` from StreamJournal; a stream its deadline cuts, or that ends
        UNAVAILABLE (a server recycling its connection at its maximum age, a replica going away),
        is resumed after the last entry it delivered."""
        next_sequence = 1
        while next_sequence <= up_to:
            request = ledger_pb2.StreamJournalRequest(
                run_id=run_id, from_sequence=next_sequence, max_entries_per_message=_STREAM_BATCH
            )
            resumed_from = next_sequence
            try:
                for response in stream(self._ledger.StreamJournal, request):
                    # A ledger older than batching sends one entry a message, in `entry`.
                    for entry in response.entries or (response.entry,):
                        if entry.sequence > up_to:
                            return
                        yield entry
                        next_sequence = entry.sequence + 1
            except (DeadlineExceeded, Unavailable):
                if next_sequence == resumed_from:
                    raise
                continue
            return

    def export_journal(self, run_id: str, path: str | os.PathLike[str]) -> ExportSummary:
        """Write the run's audit bundle to ``path`` (through a temporary file beside it, renamed
        only once complete: a failed export leaves no partial bundle). FileExistsError when the
        temporary file's name is taken: another export is writing it, an interrupted one left it,
        or someone planted it (a symlink there is never followed)."""
        check_identifiers(run_id=run_id)
        target = Path(path)
        partial = target.with_name(target.name + ".partial")
        out = _create_new(partial)
        try:
            with out:
                summary = self._write_bundle(run_id, out)
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)  # ours: created above, so never someone else's
        summary.path = str(target)
        return summary

    def _write_bundle(self, run_id: str, out: IO[bytes]) -> ExportSummary:
        reading = invoke(self._ledger.GetRun, ledger_pb2.GetRunRequest(run_id=run_id))
        run, head = reading.run, reading.head
        writer = _BundleWriter(out)
        writer.write(
            "manifest",
            {
                "format": BUNDLE_FORMAT,
                "run_id": run_id,
                "head": {"sequence": head.sequence, "hash": head.hash},
                "exported_at": to_text(utc_now()),
            },
        )
        record: dict[str, Any] = {name: getattr(run, name) for name in _RUN_MEMBERS}
        deadline = run.active_deadline
        record["active_deadline"] = _text(deadline) if run.HasField("active_deadline") else None
        writer.write(
            "run",
            {
                "record": record,
                "run_digest": run.run_digest,
                "created_by": run.created_by,
                "created_at": _text(run.created_at),
            },
        )
        writer.write(
            "signing_keys",
            {"keys": [signing_key_record(key) for key in self.signing_keys()]},
        )
        blobs, revisions, settlements = self._write_journal(writer, run_id, head.sequence)
        self._write_policies(writer, sorted(revisions))
        self._write_admissions(writer, run_id, settlements)
        self._write_blobs(writer, blobs)
        digest = writer.trailer()
        return ExportSummary(run_id, "", head.sequence, head.hash, writer.counts, digest)

    def _write_journal(
        self, writer: _BundleWriter, run_id: str, up_to: int
    ) -> tuple[dict[str, None], set[int], list[str]]:
        blobs: dict[str, None] = {}  # ordered: first reference first
        revisions: set[int] = set()
        settlements: list[str] = []
        signed = self.signed_heads(run_id) if up_to else iter(())
        pending = next(signed, None)
        for entry in self._entries(run_id, up_to):
            kind = enum_short_name(common_pb2.JournalEntryKind, entry.kind).lower()
            writer.write(
                "entry",
                {
                    "run_id": entry.run_id,
                    "sequence": entry.sequence,
                    "kind": kind,
                    "payload_json": entry.payload_json,
                    "prev_hash": entry.prev_hash,
                    "hash": entry.hash,
                    "actor": entry.actor,
                    "recorded_at": _text(entry.recorded_at),
                },
                "entries",
            )
            while pending is not None and pending.sequence <= entry.sequence:
                if pending.sequence == entry.sequence:
                    writer.write("signed_head", signed_head_record(pending), "signed_heads")
                pending = next(signed, None)
            payload = parse_json(entry.payload_json)
            blobs.update(dict.fromkeys(blob_references(payload)))
            if isinstance(payload, dict):
                revision = payload.get("policy_revision")
                if isinstance(revision, int) and not isinstance(revision, bool):
                    revisions.add(revision)
                if kind == "migration_settlement":
                    settlements.append(str(payload.get("request_id", "")))
        return blobs, revisions, settlements

    def _write_policies(self, writer: _BundleWriter, revisions: list[int]) -> None:
        for revision in revisions:
            policy = invoke(
                self._policy.GetPolicy, policy_pb2.GetPolicyRequest(revision=revision)
            ).policy
            settings = {
                described.name: getattr(policy, described.name)
                for described in policy.DESCRIPTOR.fields
                if described.name not in _POLICY_RECORD_FIELDS
            }
            writer.write(
                "policy",
                {"revision": policy.revision, "settings": settings, "digest": policy.digest},
                "policies",
            )

    def _write_admissions(self, writer: _BundleWriter, run_id: str, requests: list[str]) -> None:
        for request_id in requests:
            try:
                ticket = invoke(
                    self._ledger.GetAdmission,
                    ledger_pb2.GetAdmissionRequest(run_id=run_id, request_id=request_id),
                ).ticket
            except NotFound:
                writer.write("admission_absent", {"request_id": request_id}, "admissions")
                continue
            digests = ticket.digests
            writer.write(
                "admission",
                {
                    "request_id": ticket.request_id,
                    "operator_identity": ticket.operator_identity,
                    "settlement_sequence": ticket.settlement_sequence,
                    "claim_sequence": ticket.claim_sequence,
                    "digests": {
                        "candidate_digest": digests.candidate_digest,
                        "run_digest": digests.run_digest,
                        "journal_digest": digests.journal_digest,
                        "policy_digest": digests.policy_digest,
                    },
                    "policy_revision": ticket.policy_revision,
                    "version": ticket.version,
                    "derived_checkpoint_digest": ticket.derived_checkpoint_digest,
                    "execution_request_id": ticket.execution_request.execution_request_id,
                },
                "admissions",
            )

    def _write_blobs(self, writer: _BundleWriter, digests: dict[str, None]) -> None:
        for digest in digests:
            try:
                blob = invoke(self._ledger.GetBlob, ledger_pb2.GetBlobRequest(digest=digest))
            except NotFound:
                writer.write("blob_absent", {"digest": digest}, "blobs_absent")
                continue
            writer.write(
                "blob",
                {"digest": digest, "content": base64.b64encode(blob.content).decode("ascii")},
                "blobs",
            )


def _create_new(path: Path) -> IO[bytes]:
    """``path`` opened for writing only when this call creates it: O_EXCL refuses any name that
    exists, a symlink (dangling or not) included, and O_NOFOLLOW refuses a link by itself too;
    a planted link would otherwise have the bundle written wherever it points."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        descriptor = os.open(path, flags, 0o666)
    except FileExistsError:
        raise FileExistsError(
            errno.EEXIST,
            "already exists: another export is writing it or an interrupted one left it "
            "(remove it to export again)",
            str(path),
        ) from None
    return os.fdopen(descriptor, "wb")


def signed_head_record(head: audit_pb2.SignedHead) -> dict[str, Any]:
    """A signed head as a bundle or heads-file record (docs/formats.md, "Signed head")."""
    record: dict[str, Any] = {
        "run_id": head.run_id,
        "sequence": head.sequence,
        "head_hash": head.head_hash,
        "key_id": head.key_id,
        "signed_at": _text(head.signed_at),
        "signature": base64.b64encode(head.signature).decode("ascii"),
        "format": head.format or SIGNED_HEAD_FORMAT_V1,
    }
    if head.format == SIGNED_HEAD_FORMAT:
        previous = head.previous
        record["previous"] = (
            {
                "sequence": previous.sequence,
                "head_hash": previous.head_hash,
                "signature_digest": previous.signature_digest,
            }
            if head.HasField("previous")
            else None
        )
        record["unsigned_through"] = head.unsigned_through
    return record


def signing_key_record(key: audit_pb2.SigningKey) -> dict[str, Any]:
    """A published key as the bundle's signing_keys record and the signing-keys file list it."""
    return {
        "key_id": key.key_id,
        "algorithm": key.algorithm,
        "public_key": base64.b64encode(key.public_key).decode("ascii"),
        "not_before": _text(key.not_before) if key.HasField("not_before") else None,
        "not_after": _text(key.not_after) if key.HasField("not_after") else None,
    }
