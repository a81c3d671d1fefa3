"""The head feed and the signing keys, for monitors and auditors (ADR 0015): ``heads watch``
keeps every head it sees in an append-only heads file (docs/formats.md, "Heads file"), the way a
Certificate Transparency monitor keeps tree heads, and raises an alarm when the ledger shows a
run's head behind (rollback) or beside (fork) one it witnessed; ``signing-keys export`` writes
the keys an auditor pins.

Memory holds the newest witnessed head of each run (about 200 bytes a run), never the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from forge.continuity.v1 import audit_pb2
from forge_audit.heads import Trust, read_signed_head
from forge_audit.records import Broken, Record
from services.client._base import ClientBase, invoke
from services.client.audit import signed_head_record, signing_key_record
from shared.continuity.timeutil import to_text

HEADS_RECORD = "signed_head"
SIGNING_KEYS_FORMAT = "forge.continuity.signing-keys/1"
_FEED_PAGE = 500


@dataclass(frozen=True)
class Alarm:
    """The ledger showed a head that contradicts a witnessed one, or that no pinned key vouches
    for."""

    run_id: str
    problem: str  # "rollback", "fork" or "unverified"
    shown_sequence: int
    shown_hash: str
    witnessed_sequence: int = 0
    witnessed_hash: str = ""
    detail: str = ""

    def line(self) -> str:
        shown = f"the ledger now shows {self.shown_sequence} {self.shown_hash}"
        if self.problem == "unverified":
            return f"ALARM unverified run {self.run_id}: {shown}: {self.detail}"
        return (
            f"ALARM {self.problem} run {self.run_id}: witnessed head {self.witnessed_sequence} "
            f"{self.witnessed_hash}, {shown}"
        )


@dataclass
class WatchRound:
    """What one pass over the feed found."""

    recorded: int = 0
    seen: int = 0
    alarms: list[Alarm] = field(default_factory=list)
    cursor: str = ""


class HeadsFile:
    """An append-only heads file and the newest head of each run in it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.newest: dict[str, tuple[int, str]] = {}
        if path.exists():
            with path.open("rb") as existing:
                for line in existing:
                    head = json.loads(line)
                    known = self.newest.get(head["run_id"])
                    if known is None or head["sequence"] > known[0]:
                        self.newest[head["run_id"]] = (head["sequence"], head["head_hash"])

    def judge(self, head: audit_pb2.SignedHead, trust: Trust | None = None) -> Alarm | bool:
        """An alarm, True (a head newer than any witnessed for the run: record it) or False
        (already witnessed). With ``trust`` (pinned keys) a head no pinned key vouches for is
        an alarm too, checked by the offline verifier's own code."""
        if trust is not None:
            record = Record(signed_head_record(head), 0, head.sequence)
            try:
                trust.check(read_signed_head(record), record)
            except Broken as broken:
                detail = f"{broken.problem}: {broken.detail}"
                return Alarm(
                    head.run_id, "unverified", head.sequence, head.head_hash, detail=detail
                )
        known = self.newest.get(head.run_id)
        if known is None or head.sequence > known[0]:
            return True
        if head.sequence == known[0] and head.head_hash == known[1]:
            return False
        problem = "rollback" if head.sequence < known[0] else "fork"
        return Alarm(head.run_id, problem, head.sequence, head.head_hash, *known)

    def append(self, heads: list[audit_pb2.SignedHead]) -> None:
        """Append and flush to disk before the heads count as witnessed."""
        if not heads:
            return
        lines = b"".join(
            json.dumps(
                {"type": HEADS_RECORD, **signed_head_record(head)}, separators=(",", ":")
            ).encode("ascii")
            + b"\n"
            for head in heads
        )
        descriptor = os.open(
            self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644
        )
        try:
            os.write(descriptor, lines)
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        for head in heads:
            self.newest[head.run_id] = (head.sequence, head.head_hash)


class HeadCalls(ClientBase):
    """The head feed, the watcher and the signing keys file."""

    def head_feed(self, cursor: str = "") -> Iterator[tuple[list[audit_pb2.SignedHead], str, bool]]:
        """Pages of ListHeads from ``cursor`` until caught up: (heads, next cursor, caught up)."""
        while True:
            page = invoke(
                self._ledger.ListHeads,
                audit_pb2.ListHeadsRequest(cursor=cursor, page_size=_FEED_PAGE),
            )
            cursor = page.next_cursor
            yield list(page.heads), cursor, page.caught_up
            if page.caught_up:
                return

    def watch_heads_once(
        self, heads_file: HeadsFile, cursor: str = "", trust: Trust | None = None
    ) -> WatchRound:
        """One pass over the feed from ``cursor``: new heads appended to the file, contradicting
        (or, with ``trust``, unverified) ones reported as alarms and not recorded."""
        result = WatchRound(cursor=cursor)
        for heads, result.cursor, _ in self.head_feed(cursor):
            fresh: list[audit_pb2.SignedHead] = []
            for head in heads:
                result.seen += 1
                verdict = heads_file.judge(head, trust)
                if isinstance(verdict, Alarm):
                    result.alarms.append(verdict)
                elif verdict:
                    fresh.append(head)
            heads_file.append(fresh)
            result.recorded += len(fresh)
        return result

    def signing_keys_document(self, retire_current_at: datetime | None = None) -> dict[str, Any]:
        """The signing-keys file of the published keys (docs/formats.md, "Signing keys file");
        ``retire_current_at`` sets the current key's not_after (the file a ledger publishes as
        its earlier keys after a rotation)."""
        keys = []
        for key in invoke(self._ledger.GetSigningKeys, audit_pb2.GetSigningKeysRequest()).keys:
            record = signing_key_record(key)
            if key.current and retire_current_at is not None:
                record["not_after"] = to_text(retire_current_at)
            keys.append(record)
        return {"format": SIGNING_KEYS_FORMAT, "keys": keys}
