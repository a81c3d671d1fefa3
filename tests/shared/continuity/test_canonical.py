"""RFC 8785 canonical JSON and digests."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.continuity.canonical import (
    MAX_JSON_DEPTH,
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


LONG_INTEGER = "9" * 5_000  # past the 4,300 digits Python converts to an int


@pytest.mark.parametrize(
    "text",
    [
        f'{{"a":{LONG_INTEGER}}}',
        f'{{"a": -{LONG_INTEGER}}}',
        f"[1, {LONG_INTEGER}]",
        str(2**64),
        f" {2**64}",
        str(-(2**63) - 1),
    ],
)
def test_an_integer_beyond_64_bits_is_refused_as_it_is_read(text: str) -> None:
    """The strict parser reads the integers the compact path reads (orjson's 64 bits), and no
    literal is converted before its length is known."""
    for document in (text, text.encode()):
        with pytest.raises(CanonicalJsonError, match="integer"):
            parse_json(document)


@pytest.mark.parametrize("number", [2**64 - 1, -(2**63), 2**53, -(2**53) + 1])
def test_64_bit_integers_read_alike_on_both_paths(number: int) -> None:
    assert parse_json(str(number)) == parse_json(f" {number} ") == number


def _nested(depth: int, opening: str, closing: str, space: str = "") -> str:
    return (opening + space) * depth + "1" + closing * depth


@pytest.mark.parametrize(("opening", "closing"), [("[", "]"), ('{"a":', "}")])
@pytest.mark.parametrize("space", ["", " "], ids=["compact", "strict"])
def test_nesting_is_refused_past_the_documented_depth(
    opening: str, closing: str, space: str
) -> None:
    deepest = _nested(MAX_JSON_DEPTH, opening, closing, space)
    assert canonical_text(parse_json(deepest)) == _nested(MAX_JSON_DEPTH, opening, closing)
    for depth in (MAX_JSON_DEPTH + 1, 1_000, 100_000):
        with pytest.raises(CanonicalJsonError, match=f"deeper than {MAX_JSON_DEPTH}"):
            parse_json(_nested(depth, opening, closing, space))


def test_a_wide_document_is_not_deep() -> None:
    wide = "[" + ",".join(["[[1]]"] * (10 * MAX_JSON_DEPTH)) + "]"
    assert len(parse_json(wide)) == 10 * MAX_JSON_DEPTH


def test_unrepresentable_numbers_are_refused() -> None:
    with pytest.raises(CanonicalJsonError):
        canonical_text(2**60)


def test_digests_are_prefixed_sha256() -> None:
    assert (
        sha256_digest(b"")
        == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert is_digest(digest_of({})) and not is_digest("sha256:ABC")


@pytest.mark.parametrize("tail", ["\n", "\r\n", " ", "\x00", "0"])
def test_a_digest_is_exactly_its_71_characters(tail: str) -> None:
    """``$`` also matches before a final newline: "sha256:<64 hex>\\n" must not pass."""
    digest = digest_of({})
    assert not is_digest(digest + tail)
    assert not is_digest(tail + digest)


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


def _compact(value: object, *, sort_keys: bool = False, ensure_ascii: bool = False) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys, ensure_ascii=ensure_ascii)


@given(json_values, st.booleans(), st.booleans(), st.sampled_from(["str", "utf-8"]))
def test_compact_documents_read_exactly_as_the_standard_parser_reads_them(
    value: object, sort_keys: bool, ensure_ascii: bool, form: str
) -> None:
    """The documents the services write (compact; sorted or not; escaped or not) take orjson's
    path when it writes them back unchanged: the same values, types and member order as the
    standard parser reads (repr tells 1 from 1.0 and -0.0 from 0.0, which == does not)."""
    text = _compact(value, sort_keys=sort_keys, ensure_ascii=ensure_ascii)
    given_text: str | bytes = text if form == "str" else text.encode("utf-8")
    assert repr(parse_json(given_text)) == repr(json.loads(given_text))


@given(
    st.dictionaries(st.text(), json_values, min_size=1, max_size=4),
    json_values,
    st.data(),
)
def test_a_compact_document_with_a_duplicated_key_is_refused(
    members: dict[str, object], repeated: object, data: st.DataObject
) -> None:
    key = data.draw(st.sampled_from(sorted(members)))
    written = [f"{_compact(name)}:{_compact(item)}" for name, item in members.items()]
    written.insert(data.draw(st.integers(0, len(written))), f"{_compact(key)}:{_compact(repeated)}")
    document = "{" + ",".join(written) + "}"
    for text in (document, f"[{document}]".encode(), f'{{"outer":{document}}}'):
        with pytest.raises(CanonicalJsonError, match="duplicate key"):
            parse_json(text)


def test_canonical_documents_take_the_compact_path() -> None:
    """What makes parse_json cheap for every stored document: a canonical document is answered
    without the strict parser (the duplicate-key refusal above still holds for it)."""
    from shared.continuity import canonical

    text = canonical_text({"state": {"limits": {"request_limit": 5}}, "items": [0.5, "é", None]})
    assert canonical._compact_parse(text) == {
        "items": [0.5, "é", None],
        "state": {"limits": {"request_limit": 5}},
    }
    assert canonical._compact_parse('{"a": 1}') is canonical._NOT_COMPACT  # whitespace
    assert canonical._compact_parse('{"a":1,"a":1}') is canonical._NOT_COMPACT
