"""The one idempotency rule for every operator action keyed by a caller-chosen identifier.

An admission is keyed by ``(run_id, request_id)``, a recovery by its ``recovery_id``. Once an
action is stored under its key, a later submission under the same key is either an *identical
repeat* (same acting identity, same request content digest), which reads back the stored result
and writes nothing, or a conflict. Admission applies the rule when it reads back before doing any
work; the ledger applies it again inside the commit transaction, so a race between two
submissions cannot produce two results.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.runtime.errors import Conflict


@dataclass(frozen=True)
class StoredAction:
    """What the rule needs to know about the action already stored under a key."""

    identity: str
    content_digest: str


def replay_or_conflict(
    *,
    id_field: str,
    action_id: str,
    stored: StoredAction,
    identity: str,
    content_digest: str,
) -> None:
    """Return normally when the submission is an identical repeat of ``stored``.

    ``id_field`` names the key (``request_id``, ``recovery_id``); the reasons are derived from it:
    ``<ID_FIELD>_OWNED_BY_ANOTHER_IDENTITY`` when another identity submitted first and
    ``<ID_FIELD>_CONFLICT`` when the same identity submitted different content. Both are
    ``ALREADY_EXISTS``: the identifier is taken, choose another.
    """
    prefix = id_field.upper()
    if stored.identity != identity:
        raise Conflict(
            f"{prefix}_OWNED_BY_ANOTHER_IDENTITY",
            f"{id_field} {action_id} was submitted by another identity",
            metadata={id_field: action_id},
        )
    if stored.content_digest != content_digest:
        raise Conflict(
            f"{prefix}_CONFLICT",
            f"{id_field} {action_id} was already submitted with different content",
            metadata={
                id_field: action_id,
                "stored_request_content_digest": stored.content_digest,
            },
        )
