"""What an admission reads before the policy lock, in one statement: the journal rows the
admission's checks judge (the last entry and the newest entry of each judged kind) and the
stored bytes of the source checkpoint that the newest ``model_request_sent`` names, which the
derived checkpoint's envelope check reads (transactions/admission.py, step 9.8)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import (
    JSON,
    ColumnElement,
    Connection,
    String,
    bindparam,
    case,
    cast,
    func,
    null,
    select,
)

from services.ledger.domain.journal import EntryKind, StoredEntry
from services.ledger.repository.driver import DriverStatement, fetch
from services.ledger.repository.journal_reads import (
    NewestEntries,
    entry_from_mapping,
    newest_from_rows,
    newest_parameters,
    newest_statement,
)
from services.ledger.schema import blobs

_CHECKPOINT_KIND = EntryKind.MODEL_REQUEST_SENT.value
# By dialect and the number of kinds asked for (as journal.newest_statement).
_BUILT: dict[tuple[str, int], DriverStatement] = {}


def _named_checkpoint(payload_json: ColumnElement[str], dialect: str) -> ColumnElement[str]:
    """The payload's ``checkpoint_digest`` member as text. PostgreSQL reads the text column as
    JSON through a cast; SQLite's JSON functions read text as it is (a CAST to "JSON" there
    would be a numeric conversion)."""
    if dialect == "postgresql":
        # json_extract_path_text, not ->>: the operator's path is a parameter SQLAlchemy
        # processes per execution, the function's a plain text one (driver.py runs it as is)
        return func.json_extract_path_text(
            cast(payload_json, JSON), "checkpoint_digest", type_=String
        )
    return func.json_extract(payload_json, "$.checkpoint_digest", type_=String)


def _statement(count: int, dialect: str) -> DriverStatement:
    statement = _BUILT.get((dialect, count))
    if statement is None:
        newest = newest_statement(count).subquery("newest")
        # Only a model_request_sent row's payload is looked into (every stored payload is
        # canonical JSON; CASE keeps the others from being parsed at all).
        named = case(
            (
                newest.c.kind == bindparam("checkpoint_kind"),
                _named_checkpoint(newest.c.payload_json, dialect),
            ),
            else_=null(),
        )
        statement = DriverStatement(
            select(
                newest, blobs.c.digest.label("blob_digest"), blobs.c.content.label("blob_content")
            ).select_from(newest.outerjoin(blobs, blobs.c.digest == named))
        )
        _BUILT[(dialect, count)] = statement
    return statement


def newest_entries_and_checkpoint(
    connection: Connection, run_id: str, kinds: Sequence[EntryKind]
) -> tuple[NewestEntries, dict[str, bytes]]:
    """journal.newest_entries of ``kinds``, and the stored bytes of the source checkpoint the
    newest ``model_request_sent`` among them names, by digest (empty when none is named or its
    bytes are not stored; the caller asks again under the lock for what it does not find here)."""
    values = tuple(kind.value for kind in kinds)
    parameters = {**newest_parameters(run_id, kinds), "checkpoint_kind": _CHECKPOINT_KIND}
    statement = _statement(len(values), connection.dialect.name)
    rows = fetch(connection, statement, parameters)
    entries: list[StoredEntry] = []
    found: dict[str, bytes] = {}
    for row in rows:
        entries.append(entry_from_mapping(row))
        if row["blob_digest"] is not None:
            found[str(row["blob_digest"])] = bytes(row["blob_content"])
    return newest_from_rows(entries, values), found
