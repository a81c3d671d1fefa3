"""Stored timestamps: the fast parse of the stored form answers exactly what ``strptime`` does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import example, given
from hypothesis import strategies as st

from shared.continuity.timeutil import (
    deadline_remaining_seconds,
    from_text,
    from_timestamp,
    set_timestamp,
    timestamp_text,
    to_text,
    to_timestamp,
)

STORED = "%Y-%m-%dT%H:%M:%S.%fZ"


def _strptime(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, STORED).replace(tzinfo=UTC)
    except ValueError:
        return None


def _from_text(text: str) -> datetime | None:
    try:
        return from_text(text)
    except ValueError:
        return None


@given(st.datetimes(timezones=st.just(UTC)))
def test_every_stored_moment_reads_back_exactly(moment: datetime) -> None:
    assert from_text(to_text(moment)) == moment


# Text close to the stored form (digits, separators, a few look-alikes), and arbitrary text.
NEAR = st.text(alphabet="0123456789-T:.Z +٣", min_size=20, max_size=30)


@given(st.one_of(NEAR, st.text(max_size=40)))
def test_any_text_is_parsed_or_refused_as_strptime_would(text: str) -> None:
    assert _from_text(text) == _strptime(text)


@given(st.datetimes(timezones=st.just(UTC)), st.integers(0, 26), st.sampled_from("0 :-.Z٣"))
def test_a_stored_form_with_one_character_changed_is_judged_as_strptime_would(
    moment: datetime, index: int, replacement: str
) -> None:
    text = to_text(moment)
    changed = text[:index] + replacement + text[index + 1 :]
    assert _from_text(changed) == _strptime(changed)


def test_deadline_remaining_is_whole_seconds_left_zero_once_passed_and_minus_one_without() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert deadline_remaining_seconds(now + timedelta(seconds=90, milliseconds=999), now) == 90
    assert deadline_remaining_seconds(now - timedelta(seconds=5), now) == 0
    assert deadline_remaining_seconds(None, now) == -1


@given(st.datetimes(timezones=st.just(UTC)))
def test_a_stored_moment_becomes_the_timestamp_protobuf_would_make(moment: datetime) -> None:
    expected = Timestamp()
    expected.FromDatetime(moment)
    assert to_timestamp(to_text(moment)) == expected


@given(st.integers(-(2**40), 2**40), st.integers(-(2**31), 2**31 - 1))
@example(1796357841, 0)  # a whole second
@example(1796357841, 999)  # less than a microsecond past it
@example(-62135596800, 0)  # 0001-01-01
@example(-62135596801, 0)  # a second before it
@example(-30610224000, 5_000)  # 0999-12-31: a year padded to four digits
@example(253402300799, 999_999_999)  # the last microsecond of 9999
@example(253402300800, 0)  # a second after it
def test_a_timestamp_reads_as_text_exactly_as_through_protobufs_datetime(
    seconds: int, nanos: int
) -> None:
    stamp = Timestamp(seconds=seconds, nanos=nanos)
    try:
        expected: str | type[Exception] = to_text(from_timestamp(stamp))
    except (ValueError, OverflowError) as refused:
        expected = type(refused)
    try:
        found: str | type[Exception] = timestamp_text(stamp)
    except (ValueError, OverflowError) as refused:
        found = type(refused)
    assert found == expected


@given(st.one_of(NEAR, st.text(max_size=40), st.datetimes(timezones=st.just(UTC)).map(to_text)))
def test_any_text_is_written_into_a_timestamp_or_refused_as_the_aware_path_would(
    text: str,
) -> None:
    _written_as_the_aware_path_would(text)


def _written_as_the_aware_path_would(text: str) -> None:
    """set_timestamp writes what protobuf's FromDatetime of from_text would, or refuses."""
    moment = _from_text(text)
    stamp = Timestamp()
    if moment is None:
        with pytest.raises(ValueError):
            set_timestamp(stamp, text)
        return
    expected = Timestamp()
    expected.FromDatetime(moment)
    set_timestamp(stamp, text)
    assert stamp == expected


@given(
    st.datetimes(timezones=st.just(UTC)),
    st.lists(st.tuples(st.integers(0, 26), st.sampled_from("0 :-.Z٣9")), max_size=3),
)
def test_texts_sharing_a_remembered_second_are_each_written_or_refused_as_the_aware_path_would(
    moment: datetime, changes: list[tuple[int, str]]
) -> None:
    """The whole second is parsed once and remembered: a text that shares it but differs
    anywhere else (its microseconds, its separators, its width) is still judged on its own."""
    stored = to_text(moment)
    set_timestamp(Timestamp(), stored)  # its second is now remembered
    changed = stored
    for index, replacement in changes:
        changed = changed[:index] + replacement + changed[index + 1 :]
    for text in (changed, changed + "0", changed[:-1]):
        _written_as_the_aware_path_would(text)
