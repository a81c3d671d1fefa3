"""Signed heads (ADR 0015): every committing append signs the head it makes, in the same
transaction; the keys are published with GetSigningKeys (several after a rotation)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path

import grpc
import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import Engine, create_engine

from forge.continuity.v1 import audit_pb2, common_pb2
from services.ledger.domain.signing import (
    HeadSigner,
    SigningKeyError,
    read_public_keys,
    write_new_key,
)
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from services.ledger.transactions.head_signing import SignedHeads
from shared.continuity.timeutil import to_text
from shared.runtime.errors import Unavailable
from tests.errors import expect_error
from tests.ledger.admission_support import commit, commit_request, enable_policy, seed
from tests.ledger.conftest import LedgerClients, append_entry, run_request
from tests.support import row_counts, serve


def signed_clients(engine: Engine, signer: HeadSigner | None) -> Iterator[LedgerClients]:
    with serve("ledger", bindings(Ledger(engine, signer=signer))) as served:
        yield LedgerClients(served)


@pytest.fixture
def signer() -> HeadSigner:
    return HeadSigner.generate()


@pytest.fixture
def signing(engine: Engine, signer: HeadSigner) -> Iterator[LedgerClients]:
    yield from signed_clients(engine, signer)


def append(clients: LedgerClients, run_id: str, head: str, call_id: str) -> common_pb2.JournalEntry:
    kind = common_pb2.JOURNAL_ENTRY_KIND_TOOL_INTENT
    return append_entry(clients, run_id, head, kind, {"call_id": call_id})


def signed_heads(clients: LedgerClients, run_id: str, **paging: int) -> list[audit_pb2.SignedHead]:
    return list(
        clients.ledger("reader-token")
        .ListSignedHeads(audit_pb2.ListSignedHeadsRequest(run_id=run_id, **paging))
        .signed_heads
    )


def published(clients: LedgerClients) -> dict[str, Ed25519PublicKey]:
    keys = clients.ledger("reader-token").GetSigningKeys(audit_pb2.GetSigningKeysRequest()).keys
    return {key.key_id: Ed25519PublicKey.from_public_bytes(key.public_key) for key in keys}


def verifies(head: audit_pb2.SignedHead, keys: dict[str, Ed25519PublicKey]) -> bool:
    """Checked as docs/formats.md says, with a JCS library and Ed25519 only."""
    statement: dict[str, object] = {
        "format": head.format,
        "run_id": head.run_id,
        "sequence": head.sequence,
        "head_hash": head.head_hash,
        "signed_at": to_text(head.signed_at.ToDatetime(tzinfo=UTC)),
        "key_id": head.key_id,
    }
    if head.format == "forge.continuity.signed-head/2":
        previous = head.previous if head.HasField("previous") else None
        statement["previous"] = previous and {
            "sequence": previous.sequence,
            "head_hash": previous.head_hash,
            "signature_digest": previous.signature_digest,
        }
        statement["unsigned_through"] = head.unsigned_through
    keys[head.key_id].verify(head.signature, rfc8785.dumps(statement))  # raises otherwise
    return True


def chained(heads: list[audit_pb2.SignedHead]) -> bool:
    """Each signature names the one before it (the first names none)."""
    for before, after in zip([None, *heads], heads, strict=False):
        if before is None:
            if after.HasField("previous"):
                return False
            continue
        digest = "sha256:" + hashlib.sha256(before.signature).hexdigest()
        named = (after.previous.sequence, after.previous.head_hash, after.previous.signature_digest)
        if named != (before.sequence, before.head_hash, digest):
            return False
    return True


def test_every_append_signs_the_head_it_makes(signing: LedgerClients, signer: HeadSigner) -> None:
    signing.ledger().CreateRun(run_request())
    head = ""
    entries = []
    for index in range(3):
        entry = append(signing, "run-1", head, f"call-{index}")
        entries.append(entry)
        head = entry.hash
    heads = signed_heads(signing, "run-1")
    assert [(h.sequence, h.head_hash) for h in heads] == [(e.sequence, e.hash) for e in entries]
    keys = published(signing)
    assert list(keys) == [signer.key_id]
    assert all(verifies(h, keys) for h in heads)
    assert {h.format for h in heads} == {"forge.continuity.signed-head/2"} and chained(heads)
    # paging
    first = signing.ledger("reader-token").ListSignedHeads(
        audit_pb2.ListSignedHeadsRequest(run_id="run-1", page_size=2)
    )
    assert [h.sequence for h in first.signed_heads] == [1, 2] and first.next_sequence == 3
    assert [h.sequence for h in signed_heads(signing, "run-1", from_sequence=3)] == [3]


def test_an_admission_signs_the_head_after_its_claim(signing: LedgerClients) -> None:
    seeded = seed(signing)
    enable_policy(signing)
    ticket = commit(signing, commit_request(signing, seeded)).ticket
    heads = {h.sequence: h for h in signed_heads(signing, "run-1")}
    # settlement and claim are inserted together: one head, the claim's
    assert ticket.claim_sequence in heads and ticket.settlement_sequence not in heads
    assert max(heads) == ticket.claim_sequence
    assert chained(sorted(heads.values(), key=lambda head: head.sequence))


def test_a_refused_append_writes_no_signature(signing: LedgerClients, engine: Engine) -> None:
    signing.ledger().CreateRun(run_request())
    first = append(signing, "run-1", "", "call-0")
    before = row_counts(engine)
    expect_error(
        grpc.StatusCode.ABORTED,
        "JOURNAL_HEAD_STALE",
        lambda: append(signing, "run-1", "", "call-1"),
    )
    assert row_counts(engine) == before
    assert [h.head_hash for h in signed_heads(signing, "run-1")] == [first.hash]


def test_without_a_key_nothing_is_signed_or_published(engine: Engine) -> None:
    for clients in signed_clients(engine, None):
        clients.ledger().CreateRun(run_request())
        append(clients, "run-1", "", "call-0")
        assert published(clients) == {}
        assert signed_heads(clients, "run-1") == []
        expect_error(
            grpc.StatusCode.NOT_FOUND,
            "RUN_NOT_FOUND",
            lambda clients=clients: signed_heads(clients, "no-such-run"),
        )


def test_a_rotated_key_stays_published_and_its_signatures_verify(
    engine: Engine, tmp_path: Path
) -> None:
    old = write_new_key(tmp_path / "old.pem")
    for clients in signed_clients(engine, HeadSigner.from_files(str(tmp_path / "old.pem"))):
        clients.ledger().CreateRun(run_request())
        first = append(clients, "run-1", "", "call-0")
    # rotation: a new key signs; the old public key is still published
    (tmp_path / "published.pem").write_bytes(old.public_pem())
    write_new_key(tmp_path / "new.pem")
    rotated = HeadSigner.from_files(str(tmp_path / "new.pem"), str(tmp_path / "published.pem"))
    for clients in signed_clients(engine, rotated):
        append(clients, "run-1", first.hash, "call-1")
        keys = clients.ledger("reader-token").GetSigningKeys(audit_pb2.GetSigningKeysRequest()).keys
        assert [(k.key_id, k.current) for k in keys] == [
            (rotated.key_id, True),
            (old.key_id, False),
        ]
        heads = signed_heads(clients, "run-1")
        assert [h.key_id for h in heads] == [old.key_id, rotated.key_id]
        assert all(verifies(h, published(clients)) for h in heads)


def test_key_files_are_checked(tmp_path: Path) -> None:
    signer = write_new_key(tmp_path / "key.pem")
    assert (tmp_path / "key.pem").stat().st_mode & 0o077 == 0  # owner only
    assert HeadSigner.from_files(str(tmp_path / "key.pem")).key_id == signer.key_id
    with pytest.raises(FileExistsError):
        write_new_key(tmp_path / "key.pem")  # never overwrites a key
    (tmp_path / "public.pem").write_bytes(signer.public_pem() + signer.public_pem())
    assert read_public_keys(str(tmp_path / "public.pem")) == [signer.public_key] * 2
    (tmp_path / "bad.pem").write_text("not a key", encoding="utf-8")
    with pytest.raises(SigningKeyError):
        HeadSigner.from_files(str(tmp_path / "bad.pem"))
    with pytest.raises(SigningKeyError):
        HeadSigner.from_files(str(tmp_path / "public.pem"))


def test_every_journal_insert_goes_through_the_signing_insert() -> None:
    """A transaction that inserted journal rows itself would commit a head with no signature
    (ADR 0015): only ``transactions/base.py`` (``insert_entries``, ``insert_after_known_head``,
    ``insert_admission``) calls the repository's inserts."""
    ledger = Path(__file__).resolve().parents[2] / "services" / "ledger"
    callers = sorted(
        str(path.relative_to(ledger))
        for path in ledger.rglob("*.py")
        if "repository" not in path.parts
        and re.search(r"\binsert_journal_entr(y|ies)\w*\(", path.read_text())
    )
    assert callers == ["transactions/base.py"]


def test_a_connection_lost_in_a_transaction_keeps_its_own_error() -> None:
    """Found by the model's fault target (a PgBouncer restart, a cut around COMMIT): the
    rollback that follows a lost connection read the invalidated connection's info to drop its
    pending signatures, raised PendingRollbackError and hid the lost connection, which the
    servicer answers UNAVAILABLE DATABASE_UNAVAILABLE (retry with the same id, or read back),
    behind an internal error. The pool discards an invalidated connection's info itself."""
    engine = create_engine("sqlite://")
    heads = SignedHeads()
    heads.watch(engine)
    # what services/ledger/database.py raises when the connection is lost (SQLAlchemy has
    # invalidated it by then)
    with pytest.raises(Unavailable, match="DATABASE_UNAVAILABLE"), engine.begin() as connection:
        connection.invalidate()
        raise Unavailable("DATABASE_UNAVAILABLE", "the ledger lost its database connection")
    engine.dispose()
