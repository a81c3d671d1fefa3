"""The deadline of the RPC being served, so downstream calls never outlive their caller."""

from __future__ import annotations

import time
from contextvars import ContextVar

_deadline: ContextVar[float | None] = ContextVar("inbound_deadline", default=None)


def set_inbound_deadline(time_remaining: float | None) -> object:
    """Record the inbound call's deadline (monotonic clock); None when the caller set none."""
    return _deadline.set(None if time_remaining is None else time.monotonic() + time_remaining)


def reset_inbound_deadline(token: object) -> None:
    _deadline.reset(token)  # type: ignore[arg-type]


def remaining_seconds() -> float | None:
    """Seconds left before the inbound deadline, or None when there is none."""
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic()


def downstream_timeout(default: float) -> float:
    """The timeout for a downstream call: the caller's remaining time, capped at ``default``."""
    remaining = remaining_seconds()
    return default if remaining is None else max(0.0, min(default, remaining))
