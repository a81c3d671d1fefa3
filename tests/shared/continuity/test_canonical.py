"""RFC 8785 canonical JSON and digests."""

from __future__ import annotations

import json
import random

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from shared.continuity.canonical import (
    _SORTED_COMPACT,
    CanonicalJsonError,
    _written_alike,
    canonical_bytes,
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


# --- the standard encoder's fast path (canonical_bytes) against the library itself ---------------

# Every code point but lone surrogates: controls, quotes, backslashes, U+007F, the BMP's private
# use area (U+E000..U+FFFF) and astral characters, where UTF-16 and code-point orders differ.
any_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
ascii_keys = st.text(st.characters(max_codepoint=0x7F), max_size=6)
plain_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | any_text,
    lambda children: (
        st.lists(children, max_size=5)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(ascii_keys, children, max_size=5)
    ),
    max_leaves=30,
)
wide_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats()
    | st.text(st.characters(), max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(st.characters(), max_size=4), children, max_size=4)
    ),
    max_leaves=20,
)


def _library(value: object) -> bytes | type[Exception]:
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError):
        return CanonicalJsonError


def _ours(value: object) -> bytes | type[Exception]:
    try:
        return canonical_bytes(value)
    except CanonicalJsonError:
        return CanonicalJsonError


@given(plain_values)
def test_the_standard_encoder_writes_the_librarys_bytes_for_every_value_it_is_given(
    value: object,
) -> None:
    """The fast path is taken for these values, and its bytes are RFC 8785's."""
    assert _written_alike(value)
    assert _SORTED_COMPACT(value).encode("utf-8") == rfc8785.dumps(value)


@given(wide_values)
def test_canonical_bytes_answers_what_the_library_answers_for_any_value(value: object) -> None:
    """Floats, integers beyond 2**53, non-ASCII keys and lone surrogates included: the same
    bytes, or a refusal where the library refuses."""
    assert _ours(value) == _library(value)


@pytest.mark.parametrize(
    "value",
    [
        1.5,
        [1, 2.0],
        2**53,
        {"é": 1},
        {"a": {"\U0001f600": 1, "\ue000": 2}},
        {1: "non-string key"},
        "\ud800",  # passes the check; the encoding refuses it and the library words the refusal
    ],
)
def test_values_the_fast_path_leaves_to_the_library_still_get_its_answer(value: object) -> None:
    assert _ours(value) == _library(value)


def test_keys_are_ordered_by_utf16_code_units_as_rfc8785_orders_them() -> None:
    # U+1F600 is the surrogate pair D83D DE00, below U+E000 in UTF-16 but above it as a code point.
    value = {"\U0001f600": 1, "\ue000": 2}
    assert not _written_alike(value)
    assert canonical_text(value) == '{"\U0001f600":1,"\ue000":2}'
    assert _SORTED_COMPACT(value) != canonical_text(value)  # why non-ASCII keys are excluded


def test_deep_nesting_is_left_to_the_library() -> None:
    deep: list[object] = []
    for _ in range(5_000):
        deep = [deep]
    assert not _written_alike(deep)
