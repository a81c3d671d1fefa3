"""A small JSON Schema validator for the keywords the registered advertised schemas use.

It answers one question for eligibility: would the historical advertised schema have accepted
these arguments? Unknown keywords make the answer "no" rather than a guess.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

Schema = Mapping[str, Any]
_SUPPORTED = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum",
        "minimum", "maximum", "pattern", "description", "title", "default", "$defs", "$ref",
    }
)  # fmt: skip
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _type_ok(schema: Schema, value: Any) -> bool:
    expected = schema.get("type")
    if expected is None:
        return True
    kinds = _TYPES.get(str(expected))
    if kinds is None or not isinstance(value, kinds):
        return False
    return not (expected in ("integer", "number") and isinstance(value, bool))


def _scalar_ok(schema: Schema, value: Any) -> bool:
    if "enum" in schema and value not in schema["enum"]:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            return False
    if isinstance(value, str) and "pattern" in schema:
        return _pattern(str(schema["pattern"])).search(value) is not None
    return True


@functools.lru_cache(maxsize=64)
def _pattern(source: str) -> re.Pattern[str]:
    """A JSON Schema pattern (an ECMA-262 regular expression) in Python's syntax: ECMAScript's
    ``$`` is the end of the text, Python's also matches before a final newline, so a "$" outside
    a character class becomes ``\\Z``."""
    out: list[str] = []
    escaped = in_class = False
    for char in source:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            out.append(r"\Z")
            continue
        out.append(char)
    return re.compile("".join(out))


def _object_ok(schema: Schema, value: dict[str, Any], root: Schema) -> bool:
    properties: Schema = schema.get("properties", {})
    if any(name not in value for name in schema.get("required", [])):
        return False
    closed = schema.get("additionalProperties", True) is False
    return all(
        accepts(properties[key], item, root) if key in properties else not closed
        for key, item in value.items()
    )


def accepts(schema: Schema, value: Any, root: Schema | None = None) -> bool:
    """True when ``value`` satisfies ``schema`` (supported subset only)."""
    root = schema if root is None else root
    if not set(schema) <= _SUPPORTED:
        return False
    if "$ref" in schema:
        ref = str(schema["$ref"])
        target = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"))
        return ref.startswith("#/$defs/") and target is not None and accepts(target, value, root)
    if not (_type_ok(schema, value) and _scalar_ok(schema, value)):
        return False
    if isinstance(value, list) and "items" in schema:
        return all(accepts(schema["items"], item, root) for item in value)
    if isinstance(value, dict):
        return _object_ok(schema, value, root)
    return True
