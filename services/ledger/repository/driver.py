"""The statements every admission, fenced worker write and native append runs, on the driver's
own cursor (docs/performance-history.md, round 4, eleventh pass).

SQLAlchemy runs a cached Core statement at about twice the client CPU of the driver's cursor
running the same SQL: its execution context and result object cost more than the statement
(the snapshot header: 160 against 72 µs a read on PostgreSQL, one thread). A
:class:`DriverStatement` is compiled once per dialect and run through
``Connection._cursor_execute``, the layer of SQLAlchemy that its own execution ends in, which
keeps what the ledger relies on:

- the cursor events (``before_cursor_execute`` and ``after_cursor_execute``: the tests that
  count statements, or act before one runs, see these statements too);
- the error handling: the ``handle_error`` events (a lost connection is UNAVAILABLE, a timeout
  DATABASE_TIMEOUT: database._unavailable_on_disconnect), the connection invalidated on a
  disconnect, and every driver error raised as SQLAlchemy's own (a unique conflict is the
  ``IntegrityError`` the transaction retry looks for);
- the transaction: a connection not yet in one begins it as SQLAlchemy's autobegin does, so the
  ``begin`` events (SQLite's BEGIN, the per-transaction timeouts) still run first.

It applies the dialect's conversion of each parameter, as SQLAlchemy would; what it leaves out is
the conversion of result values and ``IN`` expansion, so a statement runs here only where it
needs neither on the connection's dialect and the driver is psycopg; elsewhere (SQLite) it runs
through ``Connection.execute`` as any statement, with the same rows.

On psycopg the SQL is rewritten once, when compiled, from SQLAlchemy's named placeholders
(``%(name)s``) to PostgreSQL's own (``$1``), and runs on a ``psycopg.RawCursor`` with the values
in that order. psycopg's ordinary cursor parses a statement's placeholders on every execution;
it remembers the parse only for statements of at most 4,096 characters and 50 parameters, so
the admission's writing statement (about 4,700 characters, 61 parameters) was parsed anew on
every admission, about 0.1 ms of the ledger's CPU each (ADR 0063). A raw cursor parses nothing.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import psycopg
from sqlalchemy import ColumnElement, Connection, Dialect, literal_column
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement, Executable

Row = dict[str, Any]


@dataclass
class _Compiled:
    """A statement's SQL text for one dialect and the values of its own bound literals."""

    #: With PostgreSQL's own placeholders ($1, $2, ...).
    sql: str
    #: The parameter each placeholder stands for: ``$n`` is ``order[n - 1]``.
    order: tuple[str, ...]
    defaults: dict[str, Any]
    returns_rows: bool
    #: The dialect's conversion of a parameter's value, by parameter name (bytes, for one)
    processors: dict[str, Callable[[Any], Any]]
    #: The result's column names, from the first run's cursor (the names the SQL gives them).
    names: tuple[str, ...] | None = None


@dataclass
class DriverStatement:
    """A Core statement run on the driver's cursor where its dialect allows (module doc)."""

    statement: Executable
    _by_dialect: dict[str, _Compiled | None] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def compiled(self, dialect: Dialect) -> _Compiled | None:
        """The SQL for ``dialect``; None: the statement needs SQLAlchemy's processing there."""
        name = dialect.name
        if name not in self._by_dialect:
            with self._lock:
                if name not in self._by_dialect:
                    self._by_dialect[name] = _compile(self.statement, dialect)
        return self._by_dialect[name]


# SQLAlchemy's psycopg dialect writes a parameter as %(name)s and a literal % as %%.
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")


def positional(sql: str) -> tuple[str, tuple[str, ...]] | None:
    """``sql`` with PostgreSQL's own placeholders for psycopg's named ones (a name used twice
    is one placeholder), and the name of each in order; None if the text holds a placeholder
    or a percent sign this does not recognize, or already a ``$n``."""
    if re.search(r"\$[0-9]", sql):
        return None
    order: list[str] = []

    def numbered(found: re.Match[str]) -> str:
        name = found.group(1)
        if name is None:
            return "%"
        if name not in order:
            order.append(name)
        return f"${order.index(name) + 1}"

    rewritten = _PLACEHOLDER.sub(numbered, sql)
    if "%" in _PLACEHOLDER.sub("", sql):
        return None
    return rewritten, tuple(order)


def _compile(statement: Executable, dialect: Dialect) -> _Compiled | None:
    if dialect.driver != "psycopg" or dialect.paramstyle != "pyformat":
        return None  # another driver: let SQLAlchemy bind the parameters
    compiled = cast(ClauseElement, statement).compile(dialect=dialect)
    assert isinstance(compiled, SQLCompiler)
    if compiled.post_compile_params or compiled.literal_execute_params:
        return None  # IN expansion happens per execution
    if compiled.escaped_bind_names:
        return None
    columns = getattr(statement, "exported_columns", ())
    for column in columns:
        if column.type.dialect_impl(dialect).result_processor(dialect, None) is not None:
            return None
    # The values the statement binds itself (a LIMIT, a literal), None included; the caller
    # gives the rest (the parameters declared without a value).
    values = compiled.construct_params(_check=False)
    named = {compiled.bind_names[bind] for bind in compiled.binds.values() if not bind.required}
    defaults = {name: values[name] for name in named}
    processors: dict[str, Callable[[Any], Any]] = {}
    for name, process in compiled._bind_processors.items():
        if not callable(process):
            return None  # a tuple's processors: an IN of tuples
        processors[name] = process
    numbered = positional(compiled.string)
    return None if numbered is None else _Compiled(*numbered, defaults, bool(columns), processors)


def in_constants(column: ColumnElement[str], values: Sequence[str]) -> ColumnElement[bool]:
    """``column IN (...)`` with the values written into the text: for constants (entry kinds,
    request states), where a bound list would be an IN that SQLAlchemy expands per execution,
    which statements here do not run. Only identifier-like values, so nothing needs quoting."""
    if not all(value.isidentifier() for value in values):
        raise ValueError(f"not constants to write into SQL: {values!r}")
    return column.in_([literal_column(f"'{value}'") for value in values])


def fetch(
    connection: Connection, statement: DriverStatement, parameters: Mapping[str, Any] | None = None
) -> list[Row]:
    """Every row ``statement`` returns with ``parameters``, each a dict by column name."""
    compiled = statement.compiled(connection.dialect)
    if compiled is None:
        result = connection.execute(statement.statement, dict(parameters or {}))
        return [dict(row) for row in result.mappings()]
    return _run(connection, compiled, parameters)


def execute(
    connection: Connection, statement: DriverStatement, parameters: Mapping[str, Any]
) -> None:
    """Run ``statement`` (a write returning nothing) with ``parameters``."""
    compiled = statement.compiled(connection.dialect)
    if compiled is None:
        connection.execute(statement.statement, dict(parameters))
        return
    _run(connection, compiled, parameters)


def _run(
    connection: Connection, compiled: _Compiled, parameters: Mapping[str, Any] | None
) -> list[Row]:
    if not connection.in_transaction():
        connection.begin()  # as SQLAlchemy's autobegin: the begin events run first
    values = dict(compiled.defaults)
    if parameters:
        values.update(parameters)
    for name, process in compiled.processors.items():
        if name in values:
            values[name] = process(values[name])
    try:
        ordered = [values[name] for name in compiled.order]
    except KeyError as missing:
        raise ValueError(f"no value for the statement's parameter {missing}") from None
    cursor: Any = psycopg.RawCursor(
        cast(psycopg.Connection[Any], connection.connection.driver_connection)
    )
    try:
        connection._cursor_execute(cursor, compiled.sql, ordered)
        if not compiled.returns_rows:
            return []
        try:
            rows: Sequence[Sequence[Any]] = cursor.fetchall()
            names = compiled.names
            if names is None:
                names = compiled.names = tuple(column[0] for column in cursor.description)
        except BaseException as error:
            connection._handle_dbapi_exception(error, compiled.sql, ordered, cursor, None)
            raise  # unreachable: the call above raises
    finally:
        cursor.close()
    return [dict(zip(names, row, strict=True)) for row in rows]
