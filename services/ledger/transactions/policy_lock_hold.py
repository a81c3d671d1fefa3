"""How long a write transaction holds the policy lock, by mode: from the lock statement's
answer until its connection is back in the pool (after the commit or rollback, so the commit's
own flush counts). The wait histogram says how long writers queue; this one says why: what
each mode costs the writers of the other while it is held (ADR 0049)."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Connection, Engine, event

from shared.runtime.metrics import observe_policy_lock_hold

_HELD = "forge_policy_lock_held"
SHARED = "shared"
EXCLUSIVE = "exclusive"


def note_locked(connection: Connection, *, shared: bool) -> None:
    """The transaction on ``connection`` holds the policy lock from now (a second lock in the
    same transaction, the re-read's, keeps the first time; an exclusive one names the mode)."""
    held = connection.info.get(_HELD)
    mode = SHARED if shared else EXCLUSIVE
    if held is None:
        connection.info[_HELD] = (mode, time.perf_counter())
    elif mode == EXCLUSIVE:
        connection.info[_HELD] = (mode, held[1])


def watch(engine: Engine) -> None:
    """Observe each hold when its connection returns to the pool (once per engine)."""
    if not event.contains(engine, "checkin", _checked_in):
        event.listen(engine, "checkin", _checked_in)


def _checked_in(_dbapi_connection: Any, record: Any) -> None:
    info = getattr(record, "info", None)
    held = info.pop(_HELD, None) if info is not None else None
    if held is not None:
        mode, since = held
        observe_policy_lock_hold(mode, time.perf_counter() - since)
