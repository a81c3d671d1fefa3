"""The services' logging setup and their one line per state change.

Every process logs to stdout; with ``FORGE_LOG_FILE`` set (``make run`` sets it under var/) each
line is also appended to that file, which all the processes share (one short line per write, so
lines from different processes never interleave within a line). ``FORGE_LOG_FORMAT`` chooses
``text`` (the default, and ``make run``'s: one readable line) or ``json`` (the deploy files': one
JSON object per line with the trace, span, run and request ids, shared.runtime.log_context).

``record_event`` writes the line a state change leaves: who did what, to which run and request,
and the outcome, as ``key=value`` pairs under the ``forge.events`` logger. The ledger, which makes
every durable change, calls it once per change it commits; an identical repeat that writes
nothing leaves no line, and refusals are logged by the server interceptor instead.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

from shared.runtime.log_context import FIELDS_ATTRIBUTE, JsonFormatter

LOG_FILE_VARIABLE = "FORGE_LOG_FILE"
LOG_FORMAT_VARIABLE = "FORGE_LOG_FORMAT"
LOG_FORMATS = ("text", "json")
FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
log = logging.getLogger("forge.events")


def log_format(env: Mapping[str, str] | None = None) -> str:
    """``FORGE_LOG_FORMAT``: text (default) or json; anything else stops the process."""
    env = os.environ if env is None else env
    chosen = env.get(LOG_FORMAT_VARIABLE, "").strip().lower() or "text"
    if chosen not in LOG_FORMATS:
        raise ValueError(f"{LOG_FORMAT_VARIABLE} must be text or json, not {chosen!r}")
    return chosen


def configure_logging(level: str, env: Mapping[str, str] | None = None) -> None:
    """stdout at ``level``, and the shared log file when ``FORGE_LOG_FILE`` names one, in the
    format ``FORGE_LOG_FORMAT`` chooses."""
    env = os.environ if env is None else env
    formatter = JsonFormatter() if log_format(env) == "json" else logging.Formatter(FORMAT)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stdout)]
    path = env.get(LOG_FILE_VARIABLE, "")
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        handlers.append(logging.FileHandler(path, encoding="utf-8"))
    for handler in handlers:
        handler.setFormatter(formatter)
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO), handlers=handlers, force=True
    )
    # The SDK's HTTP client logs every request it "sends"; inside reconstruction those requests
    # only ever reach the sealed in-process transport, and the provider URL in the log misleads.
    for noisy in ("httpx", "httpx2", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _value(value: object) -> str:
    text = str(value)
    return text if text and not any(c.isspace() or c in '"=' for c in text) else repr(text)


def event_line(what: str, actor: str, outcome: str, ids: Mapping[str, object]) -> str:
    """``event=<what> actor=<who> <id>=<value>... outcome=<outcome>`` (empty ids left out)."""
    pairs: list[tuple[str, object]] = [("event", what), ("actor", actor)]
    pairs += [(key, value) for key, value in ids.items() if value not in ("", None)]
    pairs.append(("outcome", outcome))
    return " ".join(f"{key}={_value(value)}" for key, value in pairs)


def record_event(what: str, *, actor: str, outcome: str, **ids: object) -> None:
    """One line for one committed state change (in JSON, its pairs are fields of the object)."""
    fields = {"event": what, "actor": actor, "outcome": outcome}
    fields.update({key: str(value) for key, value in ids.items() if value not in ("", None)})
    log.info("%s", event_line(what, actor, outcome, ids), extra={FIELDS_ATTRIBUTE: fields})
