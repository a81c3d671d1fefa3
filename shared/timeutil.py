"""UTC timestamps as fixed-width ISO-8601 text (microseconds, trailing Z): the form stored in the
ledger and hashed into journal entries, identical on every database."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from shared.errors import FieldViolation, InvalidArgument

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def to_text(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def from_text(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def to_timestamp(text: str | None) -> Timestamp | None:
    """Protobuf Timestamp for stored text (None stays None)."""
    if not text:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(from_text(text))
    return stamp


def from_timestamp(stamp: Timestamp) -> datetime:
    return stamp.ToDatetime(tzinfo=UTC)


def timestamp_field(field: str, stamp: Timestamp) -> datetime:
    """A caller's Timestamp field as a datetime; INVALID_ARGUMENT FIELD_INVALID when it lies
    outside what a Timestamp may hold (nanos outside 0..999999999, seconds outside years
    0001..9999), which protobuf itself would raise as a bare ValueError."""
    try:
        return from_timestamp(stamp)
    except ValueError:
        raise InvalidArgument(
            "FIELD_INVALID",
            f"{field} is not a valid timestamp",
            metadata={"field": field},
            field_violations=[FieldViolation(field, "a timestamp between years 0001 and 9999")],
        ) from None
