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

import rfc8785

DIGEST_PREFIX = "sha256:"
DIGEST_PATTERN = re.compile(r"^sha256:[0-9a-f]{64}$")
# The hash an empty journal's head carries; the first entry links to it.
GENESIS_HASH = DIGEST_PREFIX + "0" * 64


class CanonicalJsonError(ValueError):
    """The value cannot be represented as RFC 8785 canonical JSON (e.g. NaN, a float too large,
    an integer beyond IEEE 754 double precision, a non-string key)."""


# JSON's exact integers (IEEE 754 doubles): RFC 8785 refuses any integer beyond them.
_EXACT_INTEGER = 2**53 - 1
# The standard library's C encoder, sorted keys and no whitespace: for the values
# :func:`_written_alike` admits it writes RFC 8785's exact text (tests/shared/continuity pins
# that against the library), an order of magnitude faster than the library's pure-Python writer.
_SORTED_COMPACT = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
).encode


def _written_alike(value: Any) -> bool:
    """True when the standard encoder above writes ``value`` exactly as RFC 8785 does: only
    dicts, lists, tuples, strings, integers within JSON's exact range, booleans and null, with
    ASCII keys. Floats are left to the library (ECMAScript number text differs from Python's
    ``repr``), and so are non-ASCII keys (RFC 8785 orders keys by UTF-16 code units, Python by
    code points; the two orders agree on ASCII). Strings need no check: both escape the
    quote, the backslash and the control characters alike (short forms for backspace, form
    feed, newline, carriage return and tab, lowercase "u00xx" escapes for the rest) and write
    everything else as it is. Subclasses are left to the library too."""
    try:
        return _plain(value)
    except RecursionError:  # nested too deeply (or a cycle): the library gives its answer
        return False


def _plain(value: Any) -> bool:
    kind = type(value)
    if kind is dict:
        return _plain_object(value)
    if kind is list or kind is tuple:
        return _plain_array(value)
    if kind is int:
        return bool(-_EXACT_INTEGER <= value <= _EXACT_INTEGER)
    return kind is str or kind is bool or value is None


# Loops rather than all(...) over a generator: this walk runs before every digest, and a
# generator costs more than the check it makes (strings, the common leaf, skip the call).
def _plain_object(value: dict[Any, Any]) -> bool:
    for key, item in value.items():
        if type(key) is not str or not key.isascii():
            return False
        if type(item) is not str and not _plain(item):
            return False
    return True


def _plain_array(value: list[Any] | tuple[Any, ...]) -> bool:
    for item in value:  # noqa: SIM110 - see above
        if type(item) is not str and not _plain(item):
            return False
    return True


def canonical_bytes(value: Any) -> bytes:
    """Serialize ``value`` as RFC 8785 canonical JSON (UTF-8)."""
    if _written_alike(value):
        try:
            return _SORTED_COMPACT(value).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate is no UTF-8: the library words the refusal
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


# One strict decoder for every parse (json.loads with hooks would build a new one per call).
_STRICT = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constant)


def parse_json(text: str | bytes) -> Any:
    """Parse JSON strictly: duplicate keys and non-finite numbers are refused."""
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
        raise CanonicalJsonError("JSON nested too deeply") from exc


def sha256_digest(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes."""
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def digest_of(value: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``value``."""
    return sha256_digest(canonical_bytes(value))


def is_digest(value: str) -> bool:
    """True when ``value`` is a well-formed ``sha256:<64 hex>`` digest."""
    return bool(DIGEST_PATTERN.match(value))


def intact_blob(content_of: Callable[[str], bytes | None], digest: str) -> bytes | None:
    """The stored bytes ``digest`` names, only when they hash to it: None when ``digest`` is not
    a digest (nothing is read), nothing is stored, or the stored bytes were altered. Every
    caller turns None into its own refusal or hold."""
    if not is_digest(digest):
        return None
    content = content_of(digest)
    return content if content is not None and sha256_digest(content) == digest else None
