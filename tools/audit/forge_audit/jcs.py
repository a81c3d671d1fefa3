"""Strict JSON parsing, RFC 8785 canonical bytes and ``sha256:<hex>`` digests."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import rfc8785

DIGEST = re.compile(r"\Asha256:[0-9a-f]{64}\Z")
GENESIS = "sha256:" + "0" * 64


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


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant)


def parse(text: str) -> Any:
    """Parse one JSON text strictly."""
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as error:
        raise JsonRefused(f"{error.msg} at position {error.pos}") from None
    except RecursionError:
        raise JsonRefused("nested too deeply") from None


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
