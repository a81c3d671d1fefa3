"""The ids of the request being served, for every log line its handler writes, and the JSON log
format (one object per line) that carries them with the trace and span ids.

The server's metrics interceptor binds the request's ``run_id``, ``request_id`` and
``execution_request_id`` (whichever the request message has) for the length of the call; a log
call may also pass them itself (``extra={"run_id": ...}``), as ``record_event`` does.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from opentelemetry import trace

#: Request fields copied onto log lines, in this order.
ID_FIELDS = ("run_id", "request_id", "execution_request_id")
#: Extra keys a log call may add that become top-level JSON fields (record_event's ``event``,
#: ``actor``, ``outcome`` and the ids it names travel in ``fields``).
FIELDS_ATTRIBUTE = "fields"

_NONE: Mapping[str, str] = MappingProxyType({})
_bound: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "forge_log_ids", default=_NONE
)


# The id fields each message class declares, found once per class: asking a message for a field
# it lacks raises and catches an AttributeError, which cost every served call about 6 µs.
_ID_FIELDS_OF: dict[type, tuple[str, ...]] = {}


def _id_fields(message_class: type) -> tuple[str, ...]:
    fields = _ID_FIELDS_OF.get(message_class)
    if fields is None:
        declared = getattr(getattr(message_class, "DESCRIPTOR", None), "fields_by_name", None)
        # Not a protobuf message (a test's object, say): ask it for every name.
        fields = ID_FIELDS if declared is None else tuple(n for n in ID_FIELDS if n in declared)
        _ID_FIELDS_OF[message_class] = fields
    return fields


def request_ids(request: object) -> dict[str, str]:
    """The id fields ``request`` (a protobuf message, usually) carries, non-empty ones only."""
    found: dict[str, str] = {}
    for name in _id_fields(type(request)):
        value = getattr(request, name, "")
        if isinstance(value, str) and value:
            found[name] = value
    return found


class bind_request_ids:  # noqa: N801  # used as a function: ``with bind_request_ids(request):``
    """Log lines written inside carry the ids of ``request``. A class, not a generator-based
    context manager: the servers enter one for every call they serve, and a generator cost each
    call a few microseconds more to enter and leave."""

    __slots__ = ("_ids", "_token")

    def __init__(self, request: object) -> None:
        self._ids = request_ids(request)

    def __enter__(self) -> None:
        self._token = _bound.set(self._ids)

    def __exit__(self, *_exc: object) -> None:
        try:
            _bound.reset(self._token)
        except ValueError:  # a stream finished in another context than it started in
            _bound.set(_NONE)


def bound_ids() -> Mapping[str, str]:
    return _bound.get()


class JsonFormatter(logging.Formatter):
    """One JSON object per line: timestamp (UTC, ISO 8601), level, logger, message, the current
    span's trace_id and span_id when one is active, the served request's ids, and any ``fields``
    the log call passed; an exception's traceback as ``exception``."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            document["trace_id"] = format(context.trace_id, "032x")
            document["span_id"] = format(context.span_id, "016x")
        document.update(bound_ids())
        for name in ID_FIELDS:
            value = getattr(record, name, None)
            if value:
                document[name] = str(value)
        fields = getattr(record, FIELDS_ATTRIBUTE, None)
        if isinstance(fields, Mapping):
            document.update({str(key): value for key, value in fields.items()})
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, default=str, ensure_ascii=False)
