"""JSON Pointer helpers and canonical comparison (names the first differing field)."""

from __future__ import annotations

from typing import Any

from shared.continuity.canonical import canonical_bytes


def pointer(*parts: str | int) -> str:
    """RFC 6901 pointer from path parts."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def first_difference(before: Any, after: Any, path: str = "") -> str | None:
    """Pointer of the first place where two JSON values differ in canonical form, else None."""
    if canonical_bytes(before) == canonical_bytes(after):
        return None
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(before.keys() | after.keys()):
            if key not in before or key not in after:
                return path + pointer(key)
            found = first_difference(before[key], after[key], path + pointer(key))
            if found is not None:
                return found
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (a, b) in enumerate(zip(before, after, strict=True)):
            found = first_difference(a, b, path + pointer(index))
            if found is not None:
                return found
    return path or "/"
