"""The deadline of the RPC being served, so downstream calls never outlive their caller, and
whether its caller still waits, so a long loop stops when nobody will read its answer."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar

from shared.runtime.errors import Cancelled, DeadlineExceeded

_deadline: ContextVar[float | None] = ContextVar("inbound_deadline", default=None)
_active: ContextVar[Callable[[], bool] | None] = ContextVar("inbound_active", default=None)


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


def set_inbound_activity(is_active: Callable[[], bool] | None) -> object:
    """Record how to ask whether the inbound call is still wanted (its context's is_active)."""
    return _active.set(is_active)


def reset_inbound_activity(token: object) -> None:
    _active.reset(token)  # type: ignore[arg-type]


def abandon_if_gone() -> None:
    """Raise when the inbound call's deadline has passed or its caller cancelled it: for the
    loops whose work grows with the input (each step is bounded, the loop is not)."""
    deadline = _deadline.get()
    if deadline is not None and time.monotonic() >= deadline:
        raise DeadlineExceeded("CALL_DEADLINE_PASSED", "the call's deadline passed; work stopped")
    is_active = _active.get()
    if is_active is not None and not is_active():
        raise Cancelled("CALL_ABANDONED", "the caller went away; work stopped")
