"""A caller's text is stored whole or refused, never cut, on either database: PostgreSQL refuses
a value longer than its VARCHAR(n) column, SQLite would keep it, so the ledger refuses it first
with INVALID_ARGUMENT and writes nothing. A principal identity: the principals file refuses one
longer than the columns that record it, the ledger a forwarded actor or operator identity that
long, and the admission's one statement on PostgreSQL refuses an over-long value as its
statements one by one do (an entry's hash is sealed over the whole actor, so a stored cut would
break the chain's proof). A run's free text and a blob's media type: refused over their
columns' widths."""

from __future__ import annotations

import grpc
import pytest
from sqlalchemy import Engine, String, select

from forge.continuity.v1 import ledger_pb2
from services.ledger.domain import admission as admission_domain
from services.ledger.domain.runs import TEXT_WIDTHS
from services.ledger.repository import admissions
from services.ledger.schema import metadata
from services.ledger.transactions.blobs import MAX_MEDIA_TYPE_LENGTH
from services.ledger.transactions.recovery_input import RecoveryInput
from shared.continuity.identifiers import MAX_IDENTITY_LENGTH
from shared.runtime.auth import PrincipalDirectory, token_digest
from shared.runtime.errors import InvalidArgument
from tests.errors import expect_error
from tests.ledger.admission_support import commit, commit_request, enable_policy, seed
from tests.ledger.conftest import LedgerClients, run_request
from tests.ledger.one_statement_support import every_row, served_ledger
from tests.support import row_counts

LONGEST = "o" * MAX_IDENTITY_LENGTH
TOO_LONG = "o" * (MAX_IDENTITY_LENGTH + 1)

# Every column that stores a principal identity.
IDENTITY_COLUMNS = {
    ("runs", "created_by"),
    ("journal_entries", "actor"),
    ("policy_revisions", "updated_by"),
    ("execution_requests", "owner"),
    ("admission_tickets", "operator_identity"),
    ("recovery_actions", "actor"),
    ("reconciliations", "actor"),
}


def test_every_identity_column_holds_the_longest_identity() -> None:
    lengths = {
        (table.name, column.name): column.type.length
        for table in metadata.sorted_tables
        for column in table.columns
        if (table.name, column.name) in IDENTITY_COLUMNS and isinstance(column.type, String)
    }
    assert lengths == dict.fromkeys(IDENTITY_COLUMNS, MAX_IDENTITY_LENGTH)


def _principal(identity: str) -> dict[str, object]:
    return {"identity": identity, "roles": ["reader"], "token_sha256": token_digest("t")}


def test_the_principals_file_refuses_an_identity_longer_than_its_columns() -> None:
    with pytest.raises(ValueError, match=f"longer than {MAX_IDENTITY_LENGTH} characters"):
        PrincipalDirectory.from_document({"principals": [_principal(TOO_LONG)]})
    loaded = PrincipalDirectory.from_document({"principals": [_principal(LONGEST)]})
    assert loaded.authenticate("Bearer t").identity == LONGEST


def _recovery(actor: str) -> RecoveryInput:
    return RecoveryInput(
        run_id="run-1",
        request_id="req-1",
        recovery_id="rec-1",
        actor=actor,
        request_content_digest="sha256:" + "a" * 64,
        candidate_digest="sha256:" + "b" * 64,
        expected_head_hash="sha256:" + "c" * 64,
        policy_revision=1,
        valid_for_seconds=60,
        workflow="",
    )


@pytest.mark.parametrize(
    ("actor", "description"),
    [("", "required"), (TOO_LONG, f"at most {MAX_IDENTITY_LENGTH} characters")],
    ids=["empty", "too-long"],
)
def test_a_recovery_actor_empty_or_too_long_is_invalid(actor: str, description: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        _recovery(actor).validate()
    assert refused.value.reason == "RECOVERY_INVALID"
    assert ("actor", description) in {
        (v.field, v.description) for v in refused.value.field_violations
    }


def test_a_recovery_actor_of_the_longest_length_is_valid() -> None:
    with pytest.raises(InvalidArgument) as refused:
        _recovery(LONGEST).validate()  # invalid for its empty workflow only
    assert "actor" not in {v.field for v in refused.value.field_violations}


def test_an_operator_identity_too_long_is_refused_and_writes_nothing(
    clients: LedgerClients, engine: Engine
) -> None:
    seeded = seed(clients)
    enable_policy(clients)
    request = commit_request(clients, seeded, operator_identity=TOO_LONG)
    counts = row_counts(engine)
    refused = expect_error(
        grpc.StatusCode.INVALID_ARGUMENT, "ADMISSION_INVALID", lambda: commit(clients, request)
    )
    assert "operator_identity" in refused.message
    assert row_counts(engine) == counts


def test_an_operator_identity_of_the_longest_length_is_stored_whole(
    clients: LedgerClients, engine: Engine
) -> None:
    seeded = seed(clients)
    enable_policy(clients)
    assert commit(clients, commit_request(clients, seeded, operator_identity=LONGEST)).created
    # the ticket's operator, the settlement's actor and the claim's actor
    assert _stored_identities(engine) == [LONGEST] * 3


def _stored_identities(engine: Engine) -> list[str]:
    tables = {table.name: table for table in metadata.sorted_tables}
    with engine.connect() as connection:
        operators = connection.execute(select(tables["admission_tickets"].c.operator_identity))
        actors = connection.execute(
            select(tables["journal_entries"].c.actor).where(
                tables["journal_entries"].c.kind.in_(["migration_settlement", "ownership_claim"])
            )
        )
        return [*operators.scalars(), *actors.scalars()]


@pytest.mark.parametrize("one_statement", [True, False], ids=["one-statement", "one-by-one"])
def test_an_over_long_value_reaching_storage_is_refused_never_stored_cut(
    one_statement: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Storage's own guard, with the ledger's validation taken away: PostgreSQL refuses the value
    on either path (an explicit cast to the column's VARCHAR(n) would have cut it silently)."""
    monkeypatch.setattr(admission_domain, "identity_violations", lambda field, value: [])
    with served_ledger(admissions, one_statement=one_statement, monkeypatch=monkeypatch) as (
        clients,
        engine,
    ):
        seeded = seed(clients)
        enable_policy(clients)
        request = commit_request(clients, seeded, operator_identity=TOO_LONG)
        before = every_row(engine)
        with pytest.raises(grpc.RpcError):
            commit(clients, request)
        assert every_row(engine) == before


def test_the_bounds_the_ledger_checks_are_the_widths_of_their_columns() -> None:
    widths = {
        column.name: column.type.length
        for table in metadata.sorted_tables
        if table.name in ("runs", "blobs")
        for column in table.columns
        if isinstance(column.type, String)
    }
    assert {name: widths[name] for name in TEXT_WIDTHS} == TEXT_WIDTHS
    assert widths["media_type"] == MAX_MEDIA_TYPE_LENGTH


@pytest.mark.parametrize("field", sorted(TEXT_WIDTHS))
def test_a_run_field_longer_than_its_column_is_refused_and_writes_nothing(
    clients: LedgerClients, engine: Engine, field: str
) -> None:
    longest = TEXT_WIDTHS[field]
    counts = row_counts(engine)
    refused = expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "RUN_INVALID",
        lambda: clients.ledger().CreateRun(run_request(**{field: "p" * (longest + 1)})),
    )
    assert field in {violation.field for violation in refused.field_violations}
    assert row_counts(engine) == counts
    created = clients.ledger().CreateRun(run_request(**{field: "p" * longest}))
    assert getattr(created.run, field) == "p" * longest


def test_a_media_type_longer_than_its_column_is_refused_and_writes_nothing(
    clients: LedgerClients, engine: Engine
) -> None:
    counts = row_counts(engine)
    too_long = ledger_pb2.PutBlobRequest(content=b"x", media_type="m" * (MAX_MEDIA_TYPE_LENGTH + 1))
    refused = expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_INVALID",
        lambda: clients.ledger("service-token").PutBlob(too_long),
    )
    assert refused.metadata["field"] == "media_type"
    assert row_counts(engine) == counts
    longest = ledger_pb2.PutBlobRequest(content=b"x", media_type="m" * MAX_MEDIA_TYPE_LENGTH)
    stored = clients.ledger("service-token").PutBlob(longest)
    read = clients.ledger("reader-token").GetBlob(ledger_pb2.GetBlobRequest(digest=stored.digest))
    assert read.media_type == "m" * MAX_MEDIA_TYPE_LENGTH
