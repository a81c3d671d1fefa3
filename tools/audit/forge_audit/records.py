"""The records of an audit bundle (docs/formats.md, "Audit bundle") and the typed reads of their
members. Every read that fails raises :class:`Broken`, naming the sequence the record belongs to."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from forge_audit.jcs import GENESIS, is_digest, sha256

RUN_MEMBERS = (
    "run_id",
    "task_id",
    "attempt_id",
    "source_revision",
    "configuration_digest",
    "provider_timeout_seconds",
    "active_deadline",
    "command_limit",
    "time_budget_protocol",
    "source_profile",
)
#: The names under which a payload member (at any depth) names a stored blob by digest; every
#: value of a ``retained_results`` object names one too.
BLOB_MEMBERS = frozenset(
    {
        "checkpoint_digest",
        "response_digest",
        "result_digest",
        "derived_checkpoint_digest",
        "source_checkpoint_digest",
        "consumed_response_digest",
        "replaces_checkpoint_digest",
        "source_validator_report_digest",
        "executable_probe_report_digest",
        "configuration_digest",
    }
)
RETAINED_RESULTS = "retained_results"
#: The longest line, its LF not counted (docs/formats.md, "File layout"). The longest record the
#: ledger can make is a blob record: the base64 of its largest blob (16 MiB) is 22,369,624
#: bytes, with about a hundred more around it; an entry line stays under 1 MiB (a 256 KiB
#: payload, which the ASCII line writes at most three times as long).
MAX_LINE_BYTES = 24 * 1024 * 1024
# What a line is, read from its bytes before (or without) parsing it: its type member, else a
# member only that record type has. One flipped byte leaves at least one of the two intact.
_TYPE_MEMBER = re.compile(rb'"type":"([a-z_]{1,20})"')
_DISTINCT_MEMBERS = (
    (b'"payload_json":', "entry"),
    (b'"signature":', "signed_head"),
    (b'"settings":', "policy"),
    (b'"settlement_sequence":', "admission"),
    (b'"content":', "blob"),
    (b'"counts":', "trailer"),
    (b'"keys":', "signing_keys"),
    (b'"record":', "run"),
    (b'"format":', "manifest"),
    (b'"request_id":', "admission_absent"),
    (b'"digest":', "blob_absent"),
)


class Broken(Exception):
    """The first break: the sequence it is named at (0: a part not tied to one entry), the
    problem, a detail, and the bundle line."""

    def __init__(self, sequence: int, problem: str, detail: str, line: int = 0) -> None:
        super().__init__(f"sequence {sequence}: {problem}: {detail}")
        self.sequence = sequence
        self.problem = problem
        self.detail = detail
        self.line = line


def bounded_lines(stream: BinaryIO) -> Iterator[bytes]:
    """The lines of ``stream``, each with its LF. A line longer than :data:`MAX_LINE_BYTES` is
    cut to its first ``MAX_LINE_BYTES + 1`` bytes (no LF: :func:`overlong`) and ends the
    iteration, so the rest of it is never read."""
    while line := stream.readline(MAX_LINE_BYTES + 1):
        yield line
        if overlong(line):
            return


def overlong(raw: bytes) -> bool:
    """True when the line ``raw`` (with or without its LF) is longer than the bound."""
    return len(raw) - raw.endswith(b"\n") > MAX_LINE_BYTES


def guess_type(raw: bytes, known: frozenset[str]) -> str | None:
    """The record type of a line from its bytes alone (None: no clue left)."""
    found = _TYPE_MEMBER.search(raw, 0, 64)
    if found and found[1].decode() in known:
        return found[1].decode()
    return next((kind for member, kind in _DISTINCT_MEMBERS if member in raw), None)


@dataclass
class Record:
    """One parsed line: its members, its line number and the sequence problems are named at."""

    members: dict[str, Any]
    line: int
    sequence: int

    @property
    def type(self) -> str:
        value = self.members.get("type")
        return value if isinstance(value, str) else ""

    def broken(self, problem: str, detail: str) -> Broken:
        return Broken(self.sequence, problem, detail, self.line)

    def _member(self, name: str) -> Any:
        if name not in self.members:
            raise self.broken("record_invalid", f"{self.type or 'record'} has no member {name!r}")
        return self.members[name]

    def text(self, name: str) -> str:
        value = self._member(name)
        if not isinstance(value, str):
            raise self.broken("record_invalid", f"{name} must be a string")
        return value

    def integer(self, name: str) -> int:
        value = self._member(name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.broken("record_invalid", f"{name} must be an integer")
        return value

    def digest(self, name: str) -> str:
        value = self.text(name)
        if not is_digest(value):
            raise self.broken("record_invalid", f"{name} must be sha256:<64 hex>")
        return value

    def object(self, name: str) -> dict[str, Any]:
        value = self._member(name)
        if not isinstance(value, dict):
            raise self.broken("record_invalid", f"{name} must be an object")
        return value

    def base64(self, name: str) -> bytes:
        try:
            return base64.b64decode(self.text(name), validate=True)
        except (binascii.Error, ValueError):
            raise self.broken("record_invalid", f"{name} is not base64") from None


def blob_references(payload: Any) -> list[str]:
    """The blob digests a payload names, in the order its canonical text lists them: each member
    named in :data:`BLOB_MEMBERS` whose value is a digest, and each digest value of a
    ``retained_results`` object, at any depth."""
    found: list[str] = []

    def visit(value: Any, name: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == RETAINED_RESULTS and isinstance(item, dict):
                    found.extend(v for v in item.values() if is_digest(v))
                else:
                    visit(item, key)
        elif isinstance(value, list):
            for item in value:
                visit(item, "")  # an array item is not a member: it names no blob by itself
        elif name in BLOB_MEMBERS and is_digest(value):
            found.append(value)

    visit(payload, "")
    return found


def key_id(public_key: bytes) -> str:
    """A signing key's id: the digest of its 32 raw public-key bytes."""
    return sha256(public_key)


@dataclass
class Settlement:
    """What an admission record is checked against: its settlement entry and the claim after it."""

    sequence: int
    prev_hash: str
    actor: str
    payload: dict[str, Any]
    claim: dict[str, Any] | None = None


@dataclass
class Report:
    """What a verified bundle showed."""

    run_id: str = ""
    head_sequence: int = 0
    head_hash: str = GENESIS
    entries: int = 0
    signed_heads: int = 0
    head_key_id: str = ""
    policies: int = 0
    admissions: int = 0
    blobs: int = 0
    blobs_absent: list[str] = field(default_factory=list)
    commands: int = 0
    trusted_from_bundle: bool = True
    unsigned_heads_accepted: int = 0
    witnessed_heads: int = 0
