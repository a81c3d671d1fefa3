"""Playing the attacker of ADR 0015: someone with write access to the database and no signing
key, who rewrites, truncates or re-signs a run's rows around the ledger."""

from __future__ import annotations

import json

from sqlalchemy import Engine, delete, select, update

from forge_audit.jcs import canonical, digest_of
from services.ledger.domain.journal import EntryKind, seal
from services.ledger.domain.signing import HeadSigner
from services.ledger.repository.signed_heads import insert_signed_head, newest_signed_head
from services.ledger.schema import journal_entries, signed_heads
from tests.support import as_database_owner

GENESIS = "sha256:" + "0" * 64


def rewrite_from(engine: Engine, run_id: str, sequence: int) -> str:
    """Change the entry at ``sequence`` (a member ``forged`` added to its payload) and recompute
    every later hash and link: a chain that verifies by itself. Returns the new head hash."""
    with as_database_owner(engine) as connection:
        rows = connection.execute(
            select(journal_entries)
            .where(journal_entries.c.run_id == run_id)
            .order_by(journal_entries.c.sequence)
        ).all()
        prev = rows[sequence - 2].hash if sequence > 1 else GENESIS
        for row in rows[sequence - 1 :]:
            payload = row.payload_json
            if row.sequence == sequence:
                document = json.loads(payload)
                document["forged"] = digest_of({"command": "rm -rf /"})
                payload = canonical(document).decode()
            entry = seal(
                run_id, row.sequence, EntryKind(row.kind), payload, prev, row.actor, row.recorded_at
            )
            connection.execute(
                update(journal_entries)
                .where(
                    journal_entries.c.run_id == run_id, journal_entries.c.sequence == row.sequence
                )
                .values(payload_json=entry.payload_json, prev_hash=prev, hash=entry.hash)
            )
            prev = entry.hash
    return prev


def delete_signatures(engine: Engine, run_id: str, from_sequence: int = 1) -> None:
    with as_database_owner(engine) as connection:
        connection.execute(
            delete(signed_heads).where(
                signed_heads.c.run_id == run_id, signed_heads.c.sequence >= from_sequence
            )
        )


def truncate(engine: Engine, run_id: str, keep: int) -> None:
    """Delete the run's entries after ``keep`` (and nothing else)."""
    with as_database_owner(engine) as connection:
        connection.execute(
            delete(journal_entries).where(
                journal_entries.c.run_id == run_id, journal_entries.c.sequence > keep
            )
        )


def sign_head_with(engine: Engine, signer: HeadSigner, run_id: str, signed_at: str) -> None:
    """Replace the signature at the run's current head with one ``signer`` makes (a key the
    attacker holds), chained as the ledger would chain it."""
    with as_database_owner(engine) as connection:
        head = connection.execute(
            select(journal_entries.c.sequence, journal_entries.c.hash)
            .where(journal_entries.c.run_id == run_id)
            .order_by(journal_entries.c.sequence.desc())
            .limit(1)
        ).one()
        connection.execute(
            delete(signed_heads).where(
                signed_heads.c.run_id == run_id, signed_heads.c.sequence >= head.sequence
            )
        )
        before = newest_signed_head(connection, run_id)
        previous = None if before is None else before.as_previous()
        forged = signer.sign(run_id, head.sequence, head.hash, signed_at, previous)
        insert_signed_head(connection, forged)
