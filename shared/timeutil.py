"""UTC timestamps as fixed-width ISO-8601 text (microseconds, trailing Z): the form stored in the
ledger and hashed into journal entries, identical on every database."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

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
