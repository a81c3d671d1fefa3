"""What a consumed call's ``tool_call_granted`` row must bind (spec: "The proof binds each original
call ID, argument digest, source cut, grant and raw response").

A grant row binds its call to the consumed response by call id (and the response by the
journal's ``response_consumed`` digest). On top of that it must record, and the proof compares:

- ``grant``: the grant the call ran under. Absent is not a read: a row without it proves no grant.
- ``args_digest``: ``digest_of`` the call's parsed arguments, equal to the digest of the arguments
  in the consumed response itself (reconstruction's parse, or the derived checkpoint's copy).
- ``source_cut``: the source revision the call observed, equal to the run's registered source
  revision: a read of any other source proves nothing about this run's source.

Version-2 invalid-read continuity (the candidate) and the read-only observation recovery (the
candidate and the ledger's commit) judge grants with :func:`grant_problems`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from shared.continuity.canonical import is_digest

READ_GRANT: Final = "read"
SOURCE_CUT: Final = "source_cut"


def grant_problems(
    call_id: str,
    payload: Mapping[str, object],
    *,
    source_revision: str,
    args_digest: str | None = None,
    grant: str = READ_GRANT,
) -> list[str]:
    """Every reason the grant row ``payload`` of ``call_id`` does not bind the call (empty:
    bound). ``args_digest`` is the digest of the consumed response's own arguments for the call
    (None: not known here, only the row's digest's form is checked)."""
    problems: list[str] = []
    recorded = payload.get("grant")
    if recorded is None or recorded == "":
        problems.append(f"call {call_id} records no grant")
    elif recorded != grant:
        problems.append(f"call {call_id} was granted {recorded!r}, not {grant!r}")
    digest = str(payload.get("args_digest") or "")
    if not is_digest(digest):
        problems.append(f"call {call_id} records no argument digest")
    elif args_digest is not None and digest != args_digest:
        problems.append(
            f"call {call_id}'s granted argument digest {digest} is not the consumed "
            f"response's {args_digest or '(unparseable arguments)'}"
        )
    cut = payload.get(SOURCE_CUT)
    if not cut:
        problems.append(f"call {call_id} records no source cut")
    elif cut != source_revision:
        problems.append(
            f"call {call_id} observed source cut {cut!r}, not the run's source {source_revision!r}"
        )
    return problems
