"""UTC timestamps as fixed-width ISO-8601 text (microseconds, trailing Z): the form stored in the
ledger and hashed into journal entries, identical on every database."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from google.protobuf.timestamp_pb2 import Timestamp

from shared.runtime.errors import field_invalid

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def to_text(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    utc = moment.astimezone(UTC)
    # Formatted field by field: strftime("%Y") does not pad years before 1000 on every platform,
    # which broke the fixed width (and the read-back) of such timestamps.
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T"
        f"{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}.{utc.microsecond:06d}Z"
    )


_STORED_FORM = "%Y-%m-%dT%H:%M:%S.%fZ"
_STORED_PATTERN = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z\Z", re.ASCII)


def from_text(text: str) -> datetime:
    return _naive_from_text(text).replace(tzinfo=UTC)


def _naive_from_text(text: str) -> datetime:
    """Stored text as a naive UTC datetime. The fixed-width stored form is parsed by the C
    ``fromisoformat``, several times faster than ``strptime``, which still parses (or refuses)
    anything else exactly as before."""
    if _STORED_PATTERN.match(text):
        try:
            return datetime.fromisoformat(text[:-1])
        except ValueError:
            pass
    return datetime.strptime(text, _STORED_FORM)


def deadline_remaining_seconds(active_deadline: datetime | None, now: datetime) -> int:
    """Whole seconds a run has left before its active deadline, as reported in a handoff and
    in consumed resources: 0 once it has passed, -1 when the run has no deadline."""
    if active_deadline is None:
        return -1
    return max(0, math.floor((active_deadline - now).total_seconds()))


_NAIVE_EPOCH = datetime(1970, 1, 1)
_NANOS = 1_000_000_000


def set_timestamp(stamp: Timestamp, text: str) -> None:
    """Write stored text into a Timestamp (a message's field, in place: building a Timestamp and
    copying it in costs as much again). From whole seconds and microseconds: protobuf's
    ``FromDatetime`` is pure Python and was an eighth of the ledger's work on the snapshot of a
    long journal, once per entry."""
    # The stored form's whole second is parsed once per distinct second (a journal's entries
    # share seconds), its six microsecond digits each time; anything else as before.
    if len(text) == _STORED_WIDTH and text[19] == "." and text[26] == "Z":
        micros = text[20:26]
        if micros.isascii() and micros.isdigit():
            try:
                seconds = _stored_second(text[:19])
            except ValueError:
                pass
            else:
                stamp.seconds = seconds
                stamp.nanos = int(micros) * 1_000
                return
    # Naive arithmetic: a third of the cost of attaching the zone and subtracting aware times.
    elapsed = _naive_from_text(text) - _NAIVE_EPOCH
    stamp.seconds = elapsed.days * 86_400 + elapsed.seconds
    stamp.nanos = elapsed.microseconds * 1_000


_STORED_WIDTH = len("2026-01-01T00:00:00.000000Z")


@functools.lru_cache(maxsize=4096)
def _stored_second(whole_second: str) -> int:
    """Seconds since the epoch of the stored form's first 19 characters, parsed exactly as the
    whole stored text would be (ValueError where it would be refused)."""
    elapsed = _naive_from_text(whole_second + ".000000Z") - _NAIVE_EPOCH
    return elapsed.days * 86_400 + elapsed.seconds


def to_timestamp(text: str | None) -> Timestamp | None:
    """Protobuf Timestamp for stored text (None stays None)."""
    if not text:
        return None
    stamp = Timestamp()
    set_timestamp(stamp, text)
    return stamp


def from_timestamp(stamp: Timestamp) -> datetime:
    return stamp.ToDatetime(tzinfo=UTC)


def timestamp_text(stamp: Timestamp) -> str:
    """``to_text(from_timestamp(stamp))`` (microseconds, rounded toward zero), without protobuf's
    pure-Python ``ToDatetime`` for a valid Timestamp; anything else takes that path and fails as
    it does."""
    nanos = stamp.nanos
    if 0 <= nanos < _NANOS:
        try:
            whole_second = _second_text(stamp.seconds)
        except OverflowError:
            pass
        else:
            return f"{whole_second}.{nanos // 1000:06d}Z"
    return to_text(from_timestamp(stamp))


@functools.lru_cache(maxsize=4096)
def _second_text(seconds: int) -> str:
    """The stored form of a whole second since the epoch, up to its fraction: formatted once per
    distinct second (a journal's entries share seconds). ``isoformat`` pads the year to four
    digits, as :func:`to_text` does, and writes no fraction for a whole second. OverflowError
    outside years 0001..9999."""
    return (_NAIVE_EPOCH + timedelta(0, seconds)).isoformat()


def timestamp_field(field: str, stamp: Timestamp) -> datetime:
    """A caller's Timestamp field as a datetime; INVALID_ARGUMENT FIELD_INVALID when it lies
    outside what a Timestamp may hold (nanos outside 0..999999999, seconds outside years
    0001..9999), which protobuf itself would raise as a bare ValueError."""
    try:
        return from_timestamp(stamp)
    except ValueError:
        raise field_invalid(
            field, "a timestamp between years 0001 and 9999", f"{field} is not a valid timestamp"
        ) from None
