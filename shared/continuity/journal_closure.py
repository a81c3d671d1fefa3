"""The closure of a run's last model request: the last ``model_request_sent``, the
``response_consumed`` that consumed it and the ``checkpoint_stored`` of its checkpoint.

One definition, read by two services: the candidate evaluates the closure, and the ledger, asked
for a run snapshot with its closure blobs, names the blobs it sends (the request's checkpoint and
the consumed response) from it, so both derive the same digests from the same journal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Protocol, TypeVar

from shared.continuity.canonical import CanonicalJsonError, parse_json

CHECKPOINT_STORED: Final = "checkpoint_stored"
MODEL_REQUEST_SENT: Final = "model_request_sent"
RESPONSE_CONSUMED: Final = "response_consumed"
#: The only kinds :func:`closure_of` looks at: a reader may keep just these entries.
CLOSURE_KINDS: Final = frozenset({CHECKPOINT_STORED, MODEL_REQUEST_SENT, RESPONSE_CONSUMED})


def payload_object(payload_json: str) -> dict[str, Any] | None:
    """A stored payload as the closure reads it: the parsed JSON object, or None when the text is
    not a JSON object."""
    try:
        parsed = parse_json(payload_json)
    except CanonicalJsonError:
        return None
    return parsed if isinstance(parsed, dict) else None


def payload_text(payload: Mapping[str, Any] | None, key: str) -> str:
    """A payload value as text ("" when absent or not a string)."""
    value = (payload or {}).get(key)
    return value if isinstance(value, str) else ""


class ClosureEntry(Protocol):
    """What the closure reads of a journal entry (the candidate's entries fit; the ledger's rows
    fit through :class:`PayloadRow`)."""

    @property
    def sequence(self) -> int: ...

    @property
    def kind(self) -> str: ...

    def text(self, key: str) -> str: ...


class StoredRow(Protocol):
    """A stored journal row with its payload text."""

    @property
    def sequence(self) -> int: ...

    @property
    def kind(self) -> str: ...

    @property
    def payload_json(self) -> str: ...


def row_payload(row: StoredRow) -> dict[str, Any]:
    """A stored row's payload as a JSON object ({} when the text is not one)."""
    return payload_object(row.payload_json) or {}


class PayloadRow:
    """A stored row read as a :class:`ClosureEntry`; the payload is parsed on first use only."""

    __slots__ = ("_payload", "_row")

    def __init__(self, row: StoredRow) -> None:
        self._row = row
        self._payload: dict[str, Any] | None = None

    @property
    def sequence(self) -> int:
        return self._row.sequence

    @property
    def kind(self) -> str:
        return self._row.kind

    def text(self, key: str) -> str:
        if self._payload is None:
            self._payload = row_payload(self._row)
        return payload_text(self._payload, key)


E = TypeVar("E", bound=ClosureEntry)


@dataclass(frozen=True)
class Closure(Generic[E]):
    """The last model request and what the journal says about it."""

    request: E | None
    consume: E | None
    checkpoint_stored: E | None

    @property
    def request_id(self) -> str:
        return self.request.text("request_id") if self.request else ""

    @property
    def checkpoint_digest(self) -> str:
        return self.request.text("checkpoint_digest") if self.request else ""

    @property
    def response_digest(self) -> str:
        return self.consume.text("response_digest") if self.consume else ""

    @property
    def consumed_at(self) -> str:
        return self.consume.text("consumed_at") if self.consume else ""

    @property
    def blob_digests(self) -> tuple[str, ...]:
        """The blobs a candidate reads for this closure, as named (possibly malformed): the
        request's checkpoint, then, once consumed, the consumed response."""
        if self.request is None:
            return ()
        if self.consume is None:
            return (self.checkpoint_digest,)
        return (self.checkpoint_digest, self.response_digest)


def closure_of(entries: Sequence[E]) -> Closure[E]:
    """The last ``model_request_sent``, the first ``response_consumed`` after it with the same
    request_id, and the last ``checkpoint_stored`` of its checkpoint that precedes it."""
    requests = [e for e in entries if e.kind == MODEL_REQUEST_SENT]
    if not requests:
        return Closure(None, None, None)
    request = requests[-1]
    request_id = request.text("request_id")
    consume = next(
        (
            e
            for e in entries
            if e.sequence > request.sequence
            and e.kind == RESPONSE_CONSUMED
            and e.text("request_id") == request_id
        ),
        None,
    )
    digest = request.text("checkpoint_digest")
    stored = [
        e
        for e in entries
        if e.sequence < request.sequence
        and e.kind == CHECKPOINT_STORED
        and digest
        and e.text("checkpoint_digest") == digest
    ]
    return Closure(request, consume, stored[-1] if stored else None)
