"""One vector of the index (tools/audit/vectors/README.md, "The index"): the ``Vector`` record
and its JSON form, the three kinds of expected outcome (verified, broken, usage error) and the
description of what stands on a bundle's line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vectors.drafts import Draft

#: the signing-keys file the ledger exported: the trusted key unless a vector says otherwise
PINNED = "keys/ledger.signing-keys.json"


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
