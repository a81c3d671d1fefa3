"""A rewrite is refused, not re-signed (issue 43 §1, ADR 0015): the ledger extends only a head
it signed last. Each test plays a database writer without the key (tests/attacker.py) and then
lets an ordinary append happen, on a ledger that remembers what it signed and on a fresh one
(a restart, another replica)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import Engine, delete

from forge.continuity.v1 import audit_pb2
from services.ledger import unsigned_prefix
from services.ledger.domain.signing import HeadSigner, PublishedKey
from services.ledger.schema import unsigned_prefixes
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from shared.continuity.timeutil import to_text
from tests.attacker import delete_signatures, rewrite_from, sign_head_with, truncate
from tests.errors import expect_error
from tests.ledger.conftest import Clock, LedgerClients, run_request
from tests.ledger.test_signed_heads import append
from tests.support import as_database_owner, owner_url, row_counts, serve


@contextmanager
def ledger_with(
    engine: Engine, signer: HeadSigner | None, clock: Clock | None = None
) -> Iterator[LedgerClients]:
    """A ledger process of its own: it remembers nothing another one signed."""
    ledger = Ledger(engine, clock, signer=signer) if clock else Ledger(engine, signer=signer)
    with serve("ledger", bindings(ledger)) as served:
        yield LedgerClients(served)


def signed_run(clients: LedgerClients, entries: int = 3) -> str:
    """run-1 with ``entries`` signed entries; returns its head hash."""
    clients.ledger().CreateRun(run_request())
    head = ""
    for index in range(entries):
        head = append(clients, "run-1", head, f"call-{index}").hash
    return head


def refusals(finding: str) -> float:
    value = REGISTRY.get_sample_value(
        "forge_ledger_journal_head_refusals_total", {"finding": finding}
    )
    return value or 0.0


def refused_append(
    clients: LedgerClients,
    engine: Engine,
    head: str,
    finding: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An ordinary append at ``head`` is refused with ``finding``: nothing written, one alarm
    line, the refusal counted."""
    before, counted = row_counts(engine), refusals(finding)
    with caplog.at_level(logging.ERROR, logger="forge.ledger"):
        error = expect_error(
            grpc.StatusCode.FAILED_PRECONDITION,
            "JOURNAL_HEAD_UNSIGNED",
            lambda: append(clients, "run-1", head, "after-the-attack"),
        )
    assert error.metadata["finding"] == finding
    assert row_counts(engine) == before
    assert refusals(finding) == counted + 1
    alarms = [r for r in caplog.records if r.getMessage().startswith("ALARM journal head")]
    assert len(alarms) == 1 and f"finding={finding}" in alarms[0].getMessage()


def newest_heads(clients: LedgerClients, run_id: str) -> list[audit_pb2.SignedHead]:
    return list(
        clients.ledger("reader-token")
        .ListSignedHeads(audit_pb2.ListSignedHeadsRequest(run_id=run_id))
        .signed_heads
    )


def test_a_rewrite_whose_signatures_were_deleted_is_refused_not_resigned(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    signer = HeadSigner.generate()
    with ledger_with(engine, signer) as first:
        signed_run(first)
        forged = rewrite_from(engine, "run-1", 2)
        delete_signatures(engine, "run-1")
        # the ledger that signed the run, remembering another head, asks the database too
        refused_append(first, engine, forged, "head_unsigned", caplog)
    caplog.clear()
    with ledger_with(engine, signer) as restarted:
        refused_append(restarted, engine, forged, "head_unsigned", caplog)
        assert newest_heads(restarted, "run-1") == []


def test_a_rewrite_under_the_old_signatures_is_refused(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    signer = HeadSigner.generate()
    with ledger_with(engine, signer) as first:
        signed_run(first)
    forged = rewrite_from(engine, "run-1", 2)
    with ledger_with(engine, signer) as restarted:
        refused_append(restarted, engine, forged, "signature_mismatch", caplog)


def test_a_head_re_signed_with_the_attackers_key_is_refused(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    signer, attacker = HeadSigner.generate(), HeadSigner.generate()
    with ledger_with(engine, signer) as first:
        signed_run(first)
    forged = rewrite_from(engine, "run-1", 2)
    delete_signatures(engine, "run-1", from_sequence=2)
    sign_head_with(engine, attacker, "run-1", to_text(datetime.now(UTC)))
    with ledger_with(engine, signer) as restarted:
        refused_append(restarted, engine, forged, "key_unknown", caplog)


def test_a_truncated_journal_is_refused(engine: Engine, caplog: pytest.LogCaptureFixture) -> None:
    """Cut back to an earlier, genuinely signed head: refused while the newer signatures remain;
    with them deleted too, only a witness convicts it (tests/client/test_heads_watch.py), and
    the ledger that signed them says so in a warning."""
    signer = HeadSigner.generate()
    with ledger_with(engine, signer) as first:
        signed_run(first, entries=3)
        heads = newest_heads(first, "run-1")
        truncate(engine, "run-1", keep=2)
        # signatures kept: the newest one lies beyond the journal's head
        with ledger_with(engine, signer) as restarted:
            refused_append(restarted, engine, heads[1].head_hash, "signed_beyond_head", caplog)
        caplog.clear()
        refused_append(first, engine, heads[1].head_hash, "signed_beyond_head", caplog)
        caplog.clear()
        delete_signatures(engine, "run-1", from_sequence=3)
        with caplog.at_level(logging.WARNING, logger="forge.ledger"):
            append(first, "run-1", heads[1].head_hash, "after-the-rollback")
        warnings = [r.getMessage() for r in caplog.records if "no longer holds" in r.getMessage()]
        assert len(warnings) == 1 and "signed head 3 of run-1" in warnings[0]


def test_a_retired_key_does_not_vouch_for_a_head_signed_after_its_retirement(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    old = HeadSigner.generate()
    with ledger_with(engine, old) as before_rotation:
        head = signed_run(before_rotation)
    retired_at = datetime.now(UTC)
    retired = PublishedKey(old.key_id, old.public_key, False, None, to_text(retired_at))
    new = HeadSigner.generate([retired])
    # Signatures the old key made before its retirement still vouch: the append chains to them.
    with ledger_with(engine, new) as rotated:
        head = append(rotated, "run-1", head, "after-rotation").hash
        assert [h.key_id for h in newest_heads(rotated, "run-1")][-2:] == [old.key_id, new.key_id]
    # Someone holding the old key signs a rewritten head after the retirement.
    forged = rewrite_from(engine, "run-1", 2)
    delete_signatures(engine, "run-1", from_sequence=2)
    sign_head_with(engine, old, "run-1", to_text(retired_at + timedelta(seconds=1)))
    with ledger_with(engine, new) as restarted:
        refused_append(restarted, engine, forged, "key_outside_window", caplog)


def test_a_declared_pre_signing_prefix_is_signed_over_once_and_named(
    engine: Engine, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Entries a ledger without a key wrote: a ledger with one refuses to extend them until an
    operator declares the prefix (unsigned_prefixes); the first signature then names it."""
    with ledger_with(engine, None) as keyless:
        head = signed_run(keyless, entries=2)
    signer = HeadSigner.generate()
    with ledger_with(engine, signer) as keyed:
        refused_append(keyed, engine, head, "head_unsigned", caplog)
        # the declaration runs with the migration's credentials: the ledger's own role may only
        # read declarations
        declare = ["run-1", "--by", "olga", "--database-url", owner_url(database_url)]
        assert unsigned_prefix.main(declare) == 0
        # declaring twice, or over a signed history, is refused
        assert unsigned_prefix.main(declare) == 1
        entry = append(keyed, "run-1", head, "first-signed")
        append(keyed, "run-1", entry.hash, "second-signed")
        first, second = newest_heads(keyed, "run-1")
        assert (first.sequence, first.HasField("previous"), first.unsigned_through) == (3, False, 2)
        assert (second.previous.sequence, second.unsigned_through) == (3, 2)
    with as_database_owner(engine) as connection:
        connection.execute(delete(unsigned_prefixes))
    assert unsigned_prefix.main(declare) == 1


def test_the_head_feed_lists_each_runs_newest_signed_head(engine: Engine, clock: Clock) -> None:
    signer = HeadSigner.generate()
    with ledger_with(engine, signer, clock) as clients:
        head = signed_run(clients, entries=2)
        clock.advance(1)
        clients.ledger().CreateRun(run_request(run_id="run-2"))
        append(clients, "run-2", "", "call-0")
        clock.advance(1)
        append(clients, "run-1", head, "call-2")
        reader = clients.ledger("reader-token")
        page = reader.ListHeads(audit_pb2.ListHeadsRequest(page_size=1))
        assert [(h.run_id, h.sequence) for h in page.heads] == [("run-2", 1)]
        assert not page.caught_up
        rest = reader.ListHeads(audit_pb2.ListHeadsRequest(cursor=page.next_cursor))
        assert [(h.run_id, h.sequence) for h in rest.heads] == [("run-1", 3)]
        assert rest.caught_up and rest.settle_seconds > 0
        # a caught-up cursor steps back by the settle time: the recent heads come again
        again = reader.ListHeads(audit_pb2.ListHeadsRequest(cursor=rest.next_cursor))
        assert {h.run_id for h in again.heads} == {"run-1", "run-2"} and again.caught_up
        # once the settle time has passed they do not
        clock.advance(again.settle_seconds + 1)
        settled = reader.ListHeads(audit_pb2.ListHeadsRequest(cursor=again.next_cursor))
        later = reader.ListHeads(audit_pb2.ListHeadsRequest(cursor=settled.next_cursor))
        assert list(later.heads) == []
        expect_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            "FIELD_INVALID",
            lambda: reader.ListHeads(audit_pb2.ListHeadsRequest(cursor="not a cursor")),
        )


def test_the_published_keys_carry_their_windows(engine: Engine, tmp_path: Path) -> None:
    old = HeadSigner.generate()
    retired = PublishedKey(old.key_id, old.public_key, False, "2026-01-01T00:00:00.000000Z",
                           "2026-06-01T00:00:00.000000Z")  # fmt: skip
    signer = HeadSigner.generate([retired])
    with ledger_with(engine, signer) as clients:
        keys = clients.ledger("reader-token").GetSigningKeys(audit_pb2.GetSigningKeysRequest()).keys
        assert [(k.current, k.HasField("not_after")) for k in keys] == [
            (True, False),
            (False, True),
        ]
        assert to_text(keys[1].not_after.ToDatetime(tzinfo=UTC)) == "2026-06-01T00:00:00.000000Z"
