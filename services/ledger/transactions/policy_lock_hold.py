"""How long a write transaction holds the policy lock, by mode, and an admission the pending
cap's counter row: from the locking statement's answer until its connection is back in the pool
(after the commit or rollback, so the commit's own flush counts). The wait histogram says how
long writers queue; these say why: what each holder costs the writers it excludes (ADR 0049).
The counter row is what admissions still take one at a time, so its hold bounds their rate."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Connection, Engine, event

from shared.runtime.metrics import observe_pending_slot_hold, observe_policy_lock_hold

_HELD = "forge_policy_lock_held"
_SLOT = "forge_pending_slot_held"
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


def note_pending_slot(connection: Connection) -> None:
    """The transaction on ``connection`` holds the pending cap's counter row from now."""
    connection.info[_SLOT] = time.perf_counter()


def watch(engine: Engine) -> None:
    """Observe each hold when its connection returns to the pool (once per engine)."""
    if not event.contains(engine, "checkin", _checked_in):
        event.listen(engine, "checkin", _checked_in)


def _checked_in(_dbapi_connection: Any, record: Any) -> None:
    info = getattr(record, "info", None)
    if info is None:
        return
    now = time.perf_counter()
    held = info.pop(_HELD, None)
    if held is not None:
        mode, since = held
        observe_policy_lock_hold(mode, now - since)
    slot = info.pop(_SLOT, None)
    if slot is not None:
        observe_pending_slot_hold(now - slot)
