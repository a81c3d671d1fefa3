"""Listing runs and execution requests (ADR 0022): the run's continuity state, the page size, the
filter (a small AIP-160 subset, parsed here by hand) and the opaque page token.

Pure domain: the repository turns a parsed :class:`Filter` into SQL; nothing here touches the
database or gRPC.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from services.ledger.domain.execution import RequestState
from shared.continuity.timeutil import to_text
from shared.runtime.errors import FieldViolation, InvalidArgument, field_invalid

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
# A filter longer than this is refused before it is parsed (it is never a useful listing).
MAX_FILTER_LENGTH = 1024


class ContinuityState(enum.Enum):
    """What continuity last did with a run (stored names; docs/adr/0022)."""

    ACTIVE = "active"
    HELD = "held"
    ADMITTED = "admitted"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    UNRESOLVED = "unresolved"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


# The run's state after its newest execution request moved to a request state; a retired
# (reconciled) request changes nothing: its retry, queued in the same transaction, does.
RUN_STATE_OF_REQUEST: Mapping[RequestState, ContinuityState | None] = {
    RequestState.QUEUED: ContinuityState.ADMITTED,
    RequestState.CLAIMED: ContinuityState.RUNNING,
    RequestState.COMPLETED: ContinuityState.COMPLETED,
    RequestState.FAILED: ContinuityState.FAILED,
    RequestState.RECONCILED: None,
    RequestState.UNRESOLVED: ContinuityState.UNRESOLVED,
    RequestState.CANCELLED: ContinuityState.CANCELLED,
    RequestState.EXPIRED: ContinuityState.EXPIRED,
}


class Collection(enum.Enum):
    """What is listed; each has its own filter fields and its own page tokens."""

    RUNS = "runs"
    EXECUTION_REQUESTS = "execution_requests"


class Op(enum.Enum):
    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="


@dataclass(frozen=True)
class Condition:
    """One comparison: ``field`` is the canonical field name; ``value`` is a state's stored name,
    a bool, a stored timestamp text or an identifier (``prefix`` true for ``id*``)."""

    field: str
    op: Op
    value: str | bool
    prefix: bool = False


@dataclass(frozen=True)
class Filter:
    """Conditions that all hold (AND), in the order written, and the canonical text the page
    token is bound to."""

    conditions: tuple[Condition, ...]
    canonical: str


_STATE_ENUMS: Mapping[Collection, tuple[str, frozenset[str]]] = {
    Collection.RUNS: ("RUN_CONTINUITY_STATE_", frozenset(s.value for s in ContinuityState)),
    Collection.EXECUTION_REQUESTS: (
        "EXECUTION_REQUEST_STATE_",
        frozenset(s.value for s in RequestState),
    ),
}
_FIELDS: Mapping[Collection, tuple[str, ...]] = {
    Collection.RUNS: ("state", "held", "admitted", "unresolved", "updated_at", "run_id"),
    Collection.EXECUTION_REQUESTS: (
        "state",
        "unresolved",
        "run_id",
        "updated_at",
        "admission_refused",
    ),
}
_ALIASES = {"update_time": "updated_at"}
# admission_refused: a typed claim refusal made the request ineligible for automatic
# scheduling (ADR 0014, rule 3a); a dispatcher lists `state = queued AND admission_refused = false`.
_BOOLEAN_FIELDS = frozenset({"held", "admitted", "unresolved", "admission_refused"})
_ORDERED_FIELDS = frozenset({"updated_at"})
_IDENTIFIER = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_TOKEN = re.compile(
    r"""\s*(?:(?P<op><=|>=|!=|=|<|>)|(?P<string>"(?:[^"\\]|\\.)*")|(?P<word>[A-Za-z0-9_.:*-]+))"""
)


def allowed_fields(collection: Collection) -> str:
    return ", ".join(_FIELDS[collection])


def state_name(collection: Collection, text: str) -> str | None:
    """A state's stored name from its short name in any case (``queued``, ``QUEUED``) or its
    full enum name (``EXECUTION_REQUEST_STATE_QUEUED``); None when it names no state."""
    prefix, names = _STATE_ENUMS[collection]
    upper = text.upper()
    short = upper[len(prefix) :] if upper.startswith(prefix) else upper
    name = short.lower()
    return name if name in names else None


def _refuse(collection: Collection, message: str, position: int) -> InvalidArgument:
    return InvalidArgument(
        "FILTER_INVALID",
        f"filter: {message} (allowed fields: {allowed_fields(collection)}; "
        'example: state = held AND updated_at > "2026-12-01T00:00:00Z")',
        metadata={
            "field": "filter",
            "allowed_fields": allowed_fields(collection),
            "position": str(position),
        },
        field_violations=[FieldViolation("filter", message)],
    )


def _tokens(collection: Collection, text: str) -> list[tuple[str, str, int]]:
    """(kind, text, position) of each token: op, string or word."""
    tokens: list[tuple[str, str, int]] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            where = len(text) - len(text[position:].lstrip())
            raise _refuse(collection, f"unexpected character at {where}", where)
        kind = match.lastgroup or "word"
        tokens.append((kind, match.group(kind), match.start(kind)))
        position = match.end()
    return tokens


def _timestamp(collection: Collection, text: str, position: int) -> str:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise _refuse(
            collection, f"updated_at wants an RFC 3339 time with a zone, got {text!r}", position
        )
    return to_text(moment)


def _value(
    collection: Collection, field: str, op: Op, kind: str, raw: str, position: int
) -> Condition:
    try:
        text = json.loads(raw) if kind == "string" else raw
    except ValueError:
        raise _refuse(collection, f"bad string {raw!r}", position) from None
    if field not in _ORDERED_FIELDS and op not in (Op.EQ, Op.NE):
        raise _refuse(collection, f"{field} is compared with = or != only", position)
    if field in _BOOLEAN_FIELDS:
        if text not in ("true", "false") or op is not Op.EQ:
            raise _refuse(collection, f"{field} wants = true or = false, got {raw!r}", position)
        return Condition(field, op, text == "true")
    if field == "state":
        name = state_name(collection, text)
        if name is None:
            _, names = _STATE_ENUMS[collection]
            known = ", ".join(sorted(names))
            raise _refuse(collection, f"unknown state {text!r} (states: {known})", position)
        return Condition(field, op, name)
    if field == "updated_at":
        return Condition(field, op, _timestamp(collection, text, position))
    # run_id: an exact identifier, or a prefix ending in *
    prefix = text.endswith("*")
    stem = text[:-1] if prefix else text
    if op is not Op.EQ or not (_IDENTIFIER.fullmatch(stem) or (prefix and stem == "")):
        raise _refuse(
            collection, f"run_id wants = an identifier or a prefix*, got {raw!r}", position
        )
    return Condition(field, op, stem, prefix=prefix)


def parse_filter(collection: Collection, text: str) -> Filter:
    """The conditions of ``text``; InvalidArgument (FILTER_INVALID) naming the allowed fields
    for anything outside the subset."""
    if len(text) > MAX_FILTER_LENGTH:
        raise _refuse(collection, f"longer than {MAX_FILTER_LENGTH} characters", 0)
    tokens = _tokens(collection, text)
    conditions: list[Condition] = []
    index = 0
    while index < len(tokens):
        if conditions:
            kind, word, position = tokens[index]
            if kind != "word" or word != "AND":
                raise _refuse(collection, f"expected AND at {position}, got {word!r}", position)
            index += 1
        triple = tokens[index : index + 3]
        if len(triple) < 3:
            at = tokens[-1][2] if tokens else 0
            raise _refuse(collection, "incomplete comparison: want field op value", at)
        (field_kind, name, position), (op_kind, op_text, op_at), (value_kind, raw, value_at) = (
            triple
        )
        field = _ALIASES.get(name, name)
        if field_kind != "word" or field not in _FIELDS[collection]:
            raise _refuse(collection, f"unknown field {name!r}", position)
        if op_kind != "op":
            raise _refuse(collection, f"expected an operator after {name}, got {op_text!r}", op_at)
        if value_kind == "op":
            raise _refuse(collection, f"expected a value after {op_text}", value_at)
        conditions.append(_value(collection, field, Op(op_text), value_kind, raw, value_at))
        index += 3
    canonical = " AND ".join(
        f"{c.field} {c.op.value} {json.dumps(f'{c.value}*' if c.prefix else c.value)}"
        for c in conditions
    )
    return Filter(tuple(conditions), canonical)


def page_size(requested: int) -> int:
    """AIP-158: 0 is the default, above the maximum is the maximum, negative is refused."""
    if requested < 0:
        raise field_invalid(
            "page_size",
            "must be 0 (default) or positive",
            f"page_size must not be negative, got {requested}",
        )
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


@dataclass(frozen=True)
class Cursor:
    """The position after the last row of a page: its updated_at and identifier."""

    updated_at: str
    identifier: str


def _check(collection: Collection, listing: Filter, cursor: Cursor) -> str:
    material = json.dumps(
        [collection.value, listing.canonical, cursor.updated_at, cursor.identifier]
    )
    return hashlib.sha256(material.encode()).hexdigest()[:24]


def encode_page_token(collection: Collection, listing: Filter, cursor: Cursor) -> str:
    """An opaque token: the cursor and a check over it, the collection and the filter. Not a
    secret (a reader may list every row anyway); the check makes an altered or misapplied token
    a refusal instead of a silently different page."""
    body = {"u": cursor.updated_at, "i": cursor.identifier}
    body["c"] = _check(collection, listing, cursor)
    raw = json.dumps(body, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _bad_token(message: str) -> InvalidArgument:
    return InvalidArgument(
        "PAGE_TOKEN_INVALID",
        f"page_token: {message}; start again without a page_token",
        metadata={"field": "page_token"},
        field_violations=[FieldViolation("page_token", message)],
    )


def decode_page_token(collection: Collection, listing: Filter, token: str) -> Cursor | None:
    """The cursor of ``token`` (None for the first page); PAGE_TOKEN_INVALID when the token was
    altered or was issued for another collection or filter."""
    if not token:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        body = json.loads(raw)
        cursor = Cursor(str(body["u"]), str(body["i"]))
        check = body["c"]
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise _bad_token("not a token this listing issued") from None
    if check != _check(collection, listing, cursor):
        raise _bad_token("altered, or issued for another filter or collection")
    return cursor
