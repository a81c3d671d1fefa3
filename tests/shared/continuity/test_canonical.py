"""RFC 8785 canonical JSON and digests."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.continuity.canonical import (
    CanonicalJsonError,
    canonical_text,
    digest_of,
    intact_blob,
    is_digest,
    parse_json,
    sha256_digest,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(
        allow_nan=False,
        allow_infinity=False,
        min_value=-(2.0**53),
        max_value=2.0**53,
        exclude_min=True,
        exclude_max=True,
    )
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5)
    ),
    max_leaves=25,
)


@given(json_values)
def test_canonical_form_is_a_fixed_point(value: object) -> None:
    text = canonical_text(value)
    assert canonical_text(parse_json(text)) == text


@given(
    st.dictionaries(st.text(), st.integers(min_value=-1000, max_value=1000), min_size=2, max_size=8)
)
def test_digest_ignores_key_order_and_whitespace(value: dict[str, int]) -> None:
    items = list(value.items())
    random.Random(len(items)).shuffle(items)
    reordered = json.dumps(dict(items), indent=3)
    assert digest_of(parse_json(reordered)) == digest_of(value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # Vectors from RFC 8785 section 3.2.2 / appendix B (number serialization).
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (-0.0, "0"),
        (333333333.33333329, "333333333.3333333"),
        ({"b": 1, "a": [True, None, "\u20ac"]}, '{"a":[true,null,"€"],"b":1}'),
        ({"\u00e9": 1, "e": 2}, '{"e":2,"é":1}'),
    ],
)
def test_rfc8785_vectors(value: object, expected: str) -> None:
    assert canonical_text(value) == expected


@pytest.mark.parametrize("text", ['{"a":1,"a":2}', "NaN", "[Infinity]", "{bad}", ""])
def test_strict_parsing_refuses_ambiguous_json(text: str) -> None:
    with pytest.raises(CanonicalJsonError):
        parse_json(text)


def test_unrepresentable_numbers_are_refused() -> None:
    with pytest.raises(CanonicalJsonError):
        canonical_text(2**60)


def test_digests_are_prefixed_sha256() -> None:
    assert (
        sha256_digest(b"")
        == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert is_digest(digest_of({})) and not is_digest("sha256:ABC")


def test_a_blob_is_answered_only_when_its_bytes_hash_to_the_digest_that_names_it() -> None:
    stored = {sha256_digest(b"kept"): b"kept", sha256_digest(b"before"): b"after", "bad": b"x"}
    asked: list[str] = []

    def content_of(digest: str) -> bytes | None:
        asked.append(digest)
        return stored.get(digest)

    assert intact_blob(content_of, sha256_digest(b"kept")) == b"kept"
    assert intact_blob(content_of, sha256_digest(b"")) is None  # not stored
    assert intact_blob(content_of, sha256_digest(b"before")) is None  # altered
    assert intact_blob(content_of, "bad") is None
    assert "bad" not in asked  # a malformed digest is never read


@given(json_values, st.sampled_from(["str", "utf-8", "utf-16", "utf-32"]))
def test_strict_parsing_reads_what_json_reads_from_text_and_bytes(
    value: object, encoding: str
) -> None:
    text = json.dumps(value)
    given_text: str | bytes = text if encoding == "str" else text.encode(encoding)
    assert parse_json(given_text) == json.loads(given_text)


@pytest.mark.parametrize("raw", [b"\xff\x90", b'{"a":"\xc3"}', b"\x00\xd8\x00"])
def test_bytes_that_are_no_text_are_no_json(raw: bytes) -> None:
    """Hostile stored bytes fail as CanonicalJsonError, never as a UnicodeDecodeError."""
    with pytest.raises(CanonicalJsonError):
        parse_json(raw)
