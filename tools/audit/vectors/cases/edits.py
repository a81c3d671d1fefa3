"""Byte- and value-level edits several case modules share: deep nesting, another strict JSON
encoding of a record, and a one-time replacement inside an encoded line."""

from __future__ import annotations

import json
from typing import Any

from vectors.drafts import Record


def nested_arrays(depth: int) -> Any:
    """``depth`` arrays, each the only item of the one around it."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def reencoded(record: Record) -> bytes:
    """Another strict JSON encoding of the same values: members in reverse order (``type``
    last), spaces after separators, raw UTF-8 instead of ``\\u`` escapes, ``/`` escaped as
    ``\\/`` and the member name ``run_id`` spelled with an escape."""
    text = json.dumps(dict(reversed(record.items())), ensure_ascii=False, separators=(", ", ": "))
    text = text.replace("/", "\\/").replace('"run_id"', '"\\u0072un_id"')
    return text.encode("utf-8") + b"\n"


def replace_in(lines: list[bytes], at: int, old: bytes, new: bytes) -> None:
    """Replace the first ``old`` in the encoded line ``at`` (0-based) by ``new``; ``old`` must
    be there."""
    if old not in lines[at]:
        raise ValueError(f"{old!r} is not in line {at + 1}")
    lines[at] = lines[at].replace(old, new, 1)
