"""The one idempotency rule for every operator action keyed by a caller-chosen identifier.

An admission is keyed by ``(run_id, request_id)``, a recovery by its ``recovery_id``, a
reconciliation by its ``reconciliation_id``. Recovery and reconciliation ids are global: one id
names one action across every run and request (docs/adr/0018-operator-answers.md). Once an
action is stored under its key, a later submission under the same key is either an *identical
repeat* (same acting identity, same request content digest), which reads back the stored result
and writes nothing, or a conflict. Admission applies the rule when it reads back before doing any
work; the ledger applies it again inside the commit transaction, so a race between two
submissions cannot produce two results.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.contract.terms import MAX_WINDOW_SECONDS
from shared.runtime.errors import Conflict, FailedPrecondition

#: How far each key is unique, said in every conflict so the caller knows what to choose.
SCOPES = {
    "request_id": "request ids are unique per run",
    "recovery_id": "recovery ids are global: unique across every run and request",
    "reconciliation_id": "reconciliation ids are global: unique across every run and request",
}
#: How long a recovery's or reconciliation's action identity stays valid after the action was
#: stored (ADR 0038): the longest policy window, so every lease the action granted has ended by
#: then. An identical repeat after it is refused: an expired key does not justify a retry.
ACTION_IDENTITY_VALIDITY = timedelta(seconds=MAX_WINDOW_SECONDS)
#: The keys that expire; an admission's request_id is bound to its run and ticket instead.
EXPIRING_KEYS = frozenset({"recovery_id", "reconciliation_id"})
#: A recovery is also found by its request and workflow (one recovery each): an action stored
#: there under another id means the request's one action is spent, not that this id was used.
SPENT_REASON = "RECOVERY_ALREADY_SPENT"


@dataclass(frozen=True)
class StoredAction:
    """What the rule needs to know about the action already stored under a key."""

    identity: str
    content_digest: str
    #: The stored action's own id, when it was found by something else than the submitted id
    #: (a recovery by its request and workflow); "" when it was found by that id.
    action_id: str = ""
    #: What the stored action used up, in words ("request req-1's one never_claimed recovery").
    spends: str = ""
    #: When the action was stored; its identity expires ACTION_IDENTITY_VALIDITY later.
    stored_at: datetime | None = None


def replay_or_conflict(
    *,
    id_field: str,
    action_id: str,
    stored: StoredAction,
    identity: str,
    content_digest: str,
    now: datetime | None = None,
) -> None:
    """Return normally when the submission is an identical repeat of ``stored``.

    ``id_field`` names the key (``request_id``, ``recovery_id``); the reasons are derived from it:
    ``<ID_FIELD>_OWNED_BY_ANOTHER_IDENTITY`` when another identity submitted first and
    ``<ID_FIELD>_CONFLICT`` when the same identity submitted different content. Both are
    ``ALREADY_EXISTS``: the identifier is taken, choose another. A ``stored`` action found under
    another id (``stored.action_id``) spent what the submission wanted: ``RECOVERY_ALREADY_SPENT``,
    whoever submitted it; the submitted id was never used.
    """
    if stored.action_id and stored.action_id != action_id:
        raise Conflict(
            SPENT_REASON,
            f"{stored.spends or 'the action'} was already spent by {id_field} "
            f"{stored.action_id}; {id_field} {action_id} was never submitted, and no other id "
            "can replace the spent action",
            metadata={id_field: action_id, f"spent_by_{id_field}": stored.action_id},
        )
    prefix = id_field.upper()
    scope = f" ({SCOPES[id_field]}; choose another)" if id_field in SCOPES else ""
    if stored.identity != identity:
        raise Conflict(
            f"{prefix}_OWNED_BY_ANOTHER_IDENTITY",
            f"{id_field} {action_id} was submitted by another identity{scope}",
            metadata={id_field: action_id},
        )
    if stored.content_digest != content_digest:
        raise Conflict(
            f"{prefix}_CONFLICT",
            f"{id_field} {action_id} was already submitted with different content{scope}",
            metadata={
                id_field: action_id,
                "stored_request_content_digest": stored.content_digest,
            },
        )
    _check_not_expired(id_field, action_id, stored, now)


def _check_not_expired(
    id_field: str, action_id: str, stored: StoredAction, now: datetime | None
) -> None:
    """An identical repeat of a recovery or reconciliation past its identity's validity is
    refused: it is no retry of a lost answer any more (read the action back instead)."""
    if id_field not in EXPIRING_KEYS or stored.stored_at is None or now is None:
        return
    expires_at = stored.stored_at + ACTION_IDENTITY_VALIDITY
    if now >= expires_at:
        raise FailedPrecondition(
            "ACTION_IDENTITY_EXPIRED",
            f"{id_field} {action_id} expired at {expires_at.isoformat()}: an expired action "
            "identity does not justify a retry; read the saved action back, or review anew "
            "under a new identity",
            metadata={id_field: action_id, "expired_at": expires_at.isoformat()},
        )
