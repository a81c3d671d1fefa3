"""RFC 8785 text through orjson's C encoder, for the values it writes alike.

The ``rfc8785`` library writes canonical JSON in pure Python; digests are taken on every write
and every proof (journal entries, candidates, snapshots), and its writer was a tenth to a fifth
of each service's CPU under admission load. orjson with sorted keys writes the same bytes for
almost every value the services digest, at a fraction of the cost (a 6.8 KB checkpoint: 117 µs
with the standard library's encoder, which this path used before, 42 µs with orjson's, most of
it now the walk below). :func:`alike_bytes` answers only for those values and
returns None for the rest, which :mod:`shared.continuity.canonical` then hands to the library;
tests/shared/continuity pins both paths to the library's own answers.

Where the two writers agree, and where they do not:
- strings: both escape the quote, the backslash and the control characters alike (short forms
  for backspace, form feed, newline, carriage return and tab, lowercase ``u00xx`` escapes for
  the rest) and write everything else as it is; a lone surrogate is no UTF-8 for either;
- object keys: RFC 8785 orders them by UTF-16 code units, orjson by code points; the orders
  agree on ASCII keys, so a value with any other key is left to the library;
- integers: RFC 8785 refuses any beyond JSON's exact range (2**53 - 1), so those are left to it;
- floats: RFC 8785 writes the shortest round-trip digits (Python's ``repr``) in ECMAScript's
  notation. Where ``repr`` has no exponent the notations agree, except that an integral float
  loses its ``.0`` (``2.0`` is written ``2``): such a float is handed to the encoder as the
  integer ``repr`` spells, and any other as its ``repr`` itself (an ``orjson.Fragment``, written
  as it is), so no float's digits depend on orjson's own float writer. Floats whose ``repr`` has
  an exponent, and infinities and NaN, are left to the library;
- anything else (subclasses included) is left to the library, as is a value nested too deeply
  for this walk or for orjson (255 levels).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

# RFC 8785 refuses integers beyond IEEE 754 doubles' exact range.
_EXACT_INTEGER: Final = 2**53 - 1
_SORTED: Final = orjson.OPT_SORT_KEYS


class _Unsuitable(Exception):
    """The value holds something orjson does not write as RFC 8785 does."""


def alike_bytes(value: Any) -> bytes | None:
    """RFC 8785's bytes for ``value``, written by orjson; None when the value must go to the
    library (which also words every refusal)."""
    try:
        return orjson.dumps(_prepared(value), option=_SORTED)
    except (_Unsuitable, RecursionError, orjson.JSONEncodeError):
        return None


def _prepared(value: Any) -> Any:
    """``value`` itself, or a copy with its integral floats as integers; raises _Unsuitable."""
    kind = type(value)
    if kind is dict:
        return _prepared_object(value)
    if kind is list or kind is tuple:
        return _prepared_array(value)
    if kind is int:
        if -_EXACT_INTEGER <= value <= _EXACT_INTEGER:
            return value
        raise _Unsuitable
    if kind is float:
        return _prepared_float(value)
    if kind is str or kind is bool or value is None:
        return value
    raise _Unsuitable


def _prepared_float(value: float) -> orjson.Fragment | int:
    text = float.__repr__(value)
    if "e" in text or "n" in text:  # an exponent, inf or nan
        raise _Unsuitable
    if text.endswith(".0"):
        return int(text[:-2])  # the digits RFC 8785 writes; "-0.0" becomes 0, as it does
    return orjson.Fragment(text)  # repr's digits, exactly


# Loops, not comprehensions: this walk runs before every digest, and strings (the common leaf)
# skip the call. A container is copied only when one of its members changed.
def _prepared_object(value: dict[Any, Any]) -> dict[str, Any]:
    copy: dict[str, Any] | None = None
    for key, item in value.items():
        if type(key) is not str or not key.isascii():
            raise _Unsuitable
        if type(item) is str:
            continue
        prepared = _prepared(item)
        if prepared is not item:
            if copy is None:
                copy = dict(value)
            copy[key] = prepared
    return value if copy is None else copy


def _prepared_array(value: list[Any] | tuple[Any, ...]) -> list[Any] | tuple[Any, ...]:
    copy: list[Any] | None = None
    for index, item in enumerate(value):
        if type(item) is str:
            continue
        prepared = _prepared(item)
        if prepared is not item:
            if copy is None:
                copy = list(value)
            copy[index] = prepared
    return value if copy is None else copy
