"""The standard encoder's path to RFC 8785 (shared.continuity.canonical_fast) against the
``rfc8785`` library itself: the same bytes wherever it answers, the library's answer (bytes or
refusal) through canonical_bytes everywhere else."""

from __future__ import annotations

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from shared.continuity.canonical import CanonicalJsonError, canonical_bytes, canonical_text
from shared.continuity.canonical_fast import alike_bytes

# Every code point but lone surrogates: controls, quotes, backslashes, U+007F, the BMP's private
# use area (U+E000..U+FFFF) and astral characters, where UTF-16 and code-point orders differ.
any_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
ascii_keys = st.text(st.characters(max_codepoint=0x7F), max_size=6)
# Floats whose shortest digits need no exponent (1e-4 <= |x| < 1e16, and zero), integral ones
# included: the ones the fast path writes itself.
plain_floats = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda number: "e" not in repr(number)
)
plain_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | plain_floats
    | st.integers(-(10**15), 10**15).map(float)
    | any_text,
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
def test_the_fast_path_answers_for_plain_values_with_the_librarys_bytes(value: object) -> None:
    assert alike_bytes(value) == rfc8785.dumps(value)


@given(wide_values)
def test_the_fast_path_never_answers_differently_from_the_library(value: object) -> None:
    written = alike_bytes(value)
    assert written is None or written == rfc8785.dumps(value)


@given(wide_values)
def test_canonical_bytes_answers_what_the_library_answers_for_any_value(value: object) -> None:
    """Floats with exponents, integers beyond 2**53, non-ASCII keys and lone surrogates
    included: the same bytes, or a refusal where the library refuses."""
    assert _ours(value) == _library(value)


@pytest.mark.parametrize(
    ("value", "fast"),
    [
        (0.2, True),
        (-1.5, True),
        (123.456, True),
        (0.0001, True),
        (2.0, True),  # written "2"
        (-0.0, True),  # written "0"
        (1e15, True),
        (9007199254740994.0, True),  # beyond 2**53, still no exponent in its shortest digits
        ({"audio_seconds": 0.0, "temperature": 0.2}, True),
        ((1, [2.0, (3.5,)]), True),
        (0.00001, False),  # 1e-05 in Python, 0.00001 in RFC 8785
        (1e16, False),
        (1e21, False),
        (2**53, False),
        ({"é": 1}, False),
        ({"a": {"\U0001f600": 1, "\ue000": 2}}, False),
        ({1: "non-string key"}, False),
        ("\ud800", False),  # no UTF-8: the library words the refusal
        (float("nan"), False),
    ],
)
def test_which_values_take_the_fast_path_and_that_each_gets_the_librarys_answer(
    value: object, fast: bool
) -> None:
    written = alike_bytes(value)
    assert (written is not None) is fast
    assert _ours(value) == _library(value)
    if fast:
        assert written == rfc8785.dumps(value)


def test_the_input_is_not_changed_when_integral_floats_are_written_as_integers() -> None:
    value = {"a": [1.0, {"b": 2.0}], "c": "d"}
    assert canonical_text(value) == '{"a":[1,{"b":2}],"c":"d"}'
    assert value == {"a": [1.0, {"b": 2.0}], "c": "d"}
    assert type(value["a"][0]) is float  # type: ignore[index]


def test_keys_are_ordered_by_utf16_code_units_as_rfc8785_orders_them() -> None:
    # U+1F600 is the surrogate pair D83D DE00, below U+E000 in UTF-16 but above it as a code point.
    value = {"\U0001f600": 1, "\ue000": 2}
    assert alike_bytes(value) is None
    assert canonical_text(value) == '{"\U0001f600":1,"\ue000":2}'


def test_deep_nesting_is_left_to_the_library() -> None:
    deep: list[object] = []
    for _ in range(5_000):
        deep = [deep]
    assert alike_bytes(deep) is None
