"""RFC 8785 canonical JSON and SHA-256 digests: the one place every digest in the system comes from.

Digests are written ``sha256:<64 lowercase hex>`` everywhere (journal hashes, blob addresses,
candidate / run / policy digests), so a reader can always tell the algorithm from the value.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

import orjson
import rfc8785

from shared.continuity.canonical_fast import alike_bytes

DIGEST_PREFIX = "sha256:"
# \Z, not $: "$" also matches before a final newline, and "sha256:<64 hex>\n" is no digest.
DIGEST_PATTERN = re.compile(r"\Asha256:[0-9a-f]{64}\Z")
# The hash an empty journal's head carries; the first entry links to it.
GENESIS_HASH = DIGEST_PREFIX + "0" * 64
#: The deepest nesting of arrays and objects any JSON read here may have (docs/formats.md, "Audit
#: bundle", primitives; the offline verifier reads with the same limit). Far beyond any document
#: the services write (ten levels), and far below Python's recursion limit, so that whether a
#: document parses or canonicalizes never depends on how deep the caller's stack already is.
MAX_JSON_DEPTH = 128
# The integers both parsers read: orjson's (64 bits, signed or unsigned), so the compact path and
# the strict parser never answer differently. RFC 8785 narrows this to +-(2**53 - 1).
_LOWEST_INTEGER, _HIGHEST_INTEGER = -(2**63), 2**64 - 1
_LONGEST_INTEGER = len(str(_LOWEST_INTEGER))


class CanonicalJsonError(ValueError):
    """The value cannot be represented as RFC 8785 canonical JSON (e.g. NaN, a float too large,
    an integer beyond IEEE 754 double precision, a non-string key)."""


def canonical_bytes(value: Any) -> bytes:
    """Serialize ``value`` as RFC 8785 canonical JSON (UTF-8): through the standard encoder
    wherever it writes the same bytes (shared.continuity.canonical_fast), otherwise through the
    ``rfc8785`` library, which also words every refusal."""
    written = alike_bytes(value)
    if written is not None:
        return written
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        raise CanonicalJsonError(str(exc)) from exc


def canonical_text(value: Any) -> str:
    """Serialize ``value`` as RFC 8785 canonical JSON text."""
    return canonical_bytes(value).decode("utf-8")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, item in pairs:
        if key in result:
            raise CanonicalJsonError(f"duplicate key {key!r}")
        result[key] = item
    return result


def _no_constant(name: str) -> Any:
    raise CanonicalJsonError(f"non-finite number {name} is not JSON")


def _integer(literal: str) -> int:
    # Measured before it is converted: int() of a long literal costs time quadratic in its length
    # and past 4,300 digits raises a ValueError of its own.
    if len(literal) <= _LONGEST_INTEGER:
        value = int(literal)
        if _LOWEST_INTEGER <= value <= _HIGHEST_INTEGER:
            return value
    shown = literal if len(literal) <= 40 else f"{literal[:20]}... ({len(literal)} characters)"
    raise CanonicalJsonError(f"integer {shown} is beyond 64 bits")


def _deeper_than(value: Any, limit: int) -> bool:
    """True when ``value`` nests arrays and objects more than ``limit`` levels deep; level by
    level, not recursively, so the walk itself never meets Python's recursion limit."""
    level = [value] if isinstance(value, dict | list) else []
    for _ in range(limit):
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, dict | list)
        ]
        if not level:
            return False
    return True


def _too_deep() -> CanonicalJsonError:
    return CanonicalJsonError(f"JSON nests arrays and objects deeper than {MAX_JSON_DEPTH} levels")


# One strict decoder for every parse (json.loads with hooks would build a new one per call).
_STRICT = json.JSONDecoder(
    object_pairs_hook=_no_duplicates, parse_constant=_no_constant, parse_int=_integer
)
_NOT_COMPACT: Any = object()


def _compact_parse(text: str | bytes) -> Any:
    """The value of ``text`` when orjson writes that value back as exactly ``text``'s bytes;
    ``_NOT_COMPACT`` otherwise (and for anything orjson refuses), for the strict parser to read.

    Every document the services write is compact JSON (canonical or not), which this answers
    for at a third of the strict parser's cost: the strict parser's duplicate-key hook calls
    into Python for every object (74 against 21 µs for a 6.8 KB checkpoint). Writing the value
    back is the proof: orjson writes an object's members once each, in the order it read them,
    so bytes it writes back unchanged hold no duplicated key, no number out of its range and
    nothing either parser reads differently (no whitespace, no escape it would not write
    itself; orjson reads no NaN or Infinity, and floats by correct rounding, so a float written
    back as it was read is the float the standard parser reads)."""
    try:
        raw = text.encode("utf-8") if isinstance(text, str) else text
        value = orjson.loads(raw)
        if orjson.dumps(value) == raw:
            return value
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, UnicodeEncodeError):
        pass
    return _NOT_COMPACT


def parse_json(text: str | bytes) -> Any:
    """Parse JSON strictly: duplicate keys, non-finite numbers, integers beyond 64 bits and
    nesting deeper than :data:`MAX_JSON_DEPTH` are refused."""
    value = _read(text)
    # No document holding fewer brackets can be deeper: the common case costs two counts.
    opened = text.count("[") + text.count("{") if isinstance(text, str) else _brackets(text)
    if opened > MAX_JSON_DEPTH and _deeper_than(value, MAX_JSON_DEPTH):
        raise _too_deep()
    return value


def _brackets(data: bytes | bytearray) -> int:
    return data.count(b"[") + data.count(b"{")


def _read(text: str | bytes) -> Any:
    value = _compact_parse(text)
    if value is not _NOT_COMPACT:
        return value
    try:
        if isinstance(text, bytes | bytearray):
            # json.loads detects the encoding of bytes (UTF-8, -16 or -32); keep doing so.
            text = text.decode(json.detect_encoding(text), "surrogatepass")
        return _STRICT.decode(text)
    except json.JSONDecodeError as exc:
        raise CanonicalJsonError(f"invalid JSON: {exc.msg} at position {exc.pos}") from exc
    except UnicodeDecodeError as exc:
        # Bytes that are no text in the encoding they appear to use are no JSON either.
        raise CanonicalJsonError(f"invalid JSON: not {exc.encoding} text") from exc
    except RecursionError as exc:
        raise _too_deep() from exc


def sha256_digest(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes."""
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def digest_of(value: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``value``."""
    return sha256_digest(canonical_bytes(value))


def is_digest(value: object) -> bool:
    """True when ``value`` is a well-formed ``sha256:<64 hex>`` digest (and nothing else: a
    non-string, whatever a payload holds, is none)."""
    return isinstance(value, str) and DIGEST_PATTERN.fullmatch(value) is not None


def intact_blob(content_of: Callable[[str], bytes | None], digest: str) -> bytes | None:
    """The stored bytes ``digest`` names, only when they hash to it: None when ``digest`` is not
    a digest (nothing is read), nothing is stored, or the stored bytes were altered. Every
    caller turns None into its own refusal or hold."""
    if not is_digest(digest):
        return None
    content = content_of(digest)
    return content if content is not None and sha256_digest(content) == digest else None
