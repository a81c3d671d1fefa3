"""Strict JSON parsing, RFC 8785 canonical bytes and ``sha256:<hex>`` digests (docs/formats.md,
"Audit bundle", primitives)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import rfc8785

DIGEST = re.compile(r"\Asha256:[0-9a-f]{64}\Z")
GENESIS = "sha256:" + "0" * 64
#: The deepest nesting of arrays and objects a line or a payload may have: the ledger's limit, so
#: the two never disagree, and far below Python's recursion limit, so whether a document parses
#: never depends on the stack.
MAX_DEPTH = 128
# Every integer of a bundle is within RFC 8785's exact range; a longer literal is refused before
# it is converted (int() of one costs quadratic time, and past 4,300 digits raises by itself).
_EXACT = 2**53 - 1
_LONGEST = len(str(-_EXACT))


class JsonRefused(ValueError):
    """Not strict JSON (duplicate member, non-finite number, bad syntax) or not canonicalizable."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise JsonRefused(f"duplicate member {key!r}")
        result[key] = value
    return result


def _constant(name: str) -> Any:
    raise JsonRefused(f"{name} is not JSON")


def _integer(literal: str) -> int:
    if len(literal) <= _LONGEST and -_EXACT <= (value := int(literal)) <= _EXACT:
        return value
    shown = literal if len(literal) <= 40 else f"{literal[:20]}... ({len(literal)} characters)"
    raise JsonRefused(f"integer {shown} is beyond +-(2**53 - 1)")


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant, parse_int=_integer)
_TOO_DEEP = f"arrays and objects nested deeper than {MAX_DEPTH} levels"
# A surrogate reaches a parsed string only through an escape (raw ones are no UTF-8).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def parse(text: str) -> Any:
    """Parse one JSON text strictly."""
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as error:
        raise JsonRefused(f"{error.msg} at position {error.pos}") from None
    except RecursionError:
        raise JsonRefused(_TOO_DEEP) from None
    # fewer brackets than the limit cannot nest deeper: most lines are not walked
    if text.count("[") + text.count("{") > MAX_DEPTH and _deeper(value):
        raise JsonRefused(_TOO_DEEP)
    if _SURROGATE_ESCAPE.search(text):
        canonical(value)  # a lone surrogate has no UTF-8, so no canonical bytes: refused here
    return value


def _deeper(value: Any) -> bool:
    """More than :data:`MAX_DEPTH` levels, walked level by level (no recursion)."""
    level = [value] if isinstance(value, dict | list) else []
    for _ in range(MAX_DEPTH):
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, dict | list)
        ]
        if not level:
            return False
    return True


def canonical(value: Any) -> bytes:
    """RFC 8785 canonical UTF-8 bytes of ``value``."""
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as error:
        raise JsonRefused(str(error)) from None


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest_of(value: Any) -> str:
    return sha256(canonical(value))


def is_digest(value: object) -> bool:
    return isinstance(value, str) and DIGEST.fullmatch(value) is not None
