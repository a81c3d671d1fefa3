"""A completion certifies from the entries of ``CERTIFYING_KINDS`` alone, read in the effects'
statement: for any journal, the certification of those entries is the certification of them all,
and leaving out any one of those kinds changes the answer for some journal."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.ledger.domain.completion import CERTIFYING_KINDS, certify
from services.ledger.domain.journal import EntryKind, StoredEntry

EXR = "exr_done"
KIND_NAMES = frozenset(kind.value for kind in CERTIFYING_KINDS)

HOLDER, OTHER = "wanda-worker", "walt-worker"
_ABSENT = object()


def _mostly(usual: object, times: int, *others: object) -> st.SearchStrategy[Any]:
    """``usual`` ``times`` in ``times`` + len(``others``) draws, else one of ``others``."""
    return st.sampled_from([usual] * times + list(others))


# What certify and its lease fence read of a payload, each member mostly naming the request, its
# current lease and one of two calls, else another request or lease (a bool or a text one too),
# a call id that is no text, any status, or absent; the rest of a payload is never read.
_PAYLOADS = st.fixed_dictionaries(
    {
        "execution_request_id": _mostly(EXR, 6, "exr_other", _ABSENT),
        "lease_generation": _mostly(2, 6, 1, True, "2", _ABSENT),
        "call_id": st.sampled_from(["c1", "c1", "c2", "c2", 3, _ABSENT]),
        "status": st.sampled_from(["succeeded", "failed", "unknown", "pending", _ABSENT]),
        "event": st.sampled_from(["completed", "requeued_by_recovery", _ABSENT]),
    }
).map(lambda payload: json.dumps({k: v for k, v in payload.items() if v is not _ABSENT}))
# One payload in eight is no object at all.
_PAYLOAD_TEXTS = st.tuples(_mostly(True, 7, False), _PAYLOADS, st.sampled_from(["[]", "null"]))
#: The kinds a request's lease, calls and reconciliation are written in, the worker's tool calls
#: most, drawn half the time so that random journals often hold a claim of the request and calls
#: under it; the other half is drawn from every kind.
_ABOUT_A_REQUEST = [
    *[EntryKind.WORKER_CLAIMED] * 2,
    *[EntryKind.TOOL_INTENT, EntryKind.TOOL_OUTCOME] * 3,
    EntryKind.MODEL_REQUEST_SENT,
    EntryKind.TOOL_CALL_GRANTED,
    EntryKind.REQUEST_FAILED,
    EntryKind.REQUEST_EVENT,
    EntryKind.RECONCILIATION_VERIFICATION,
    EntryKind.RECONCILIATION_SETTLEMENT,
]
_ROWS = st.tuples(
    st.one_of(st.sampled_from(_ABOUT_A_REQUEST), st.sampled_from(list(EntryKind))),
    _PAYLOAD_TEXTS.map(lambda drawn: drawn[1] if drawn[0] else drawn[2]),
    _mostly(HOLDER, 3, OTHER),
)


def _journal(rows: list[tuple[str, str, str]]) -> list[StoredEntry]:
    return [
        StoredEntry("run-1", sequence, kind, payload, "", f"h{sequence}", actor, "")
        for sequence, (kind, payload, actor) in enumerate(rows, start=40)
    ]


@settings(max_examples=3000, deadline=None)
@given(st.lists(_ROWS, min_size=8, max_size=40), _mostly(2, 2, 1), st.sampled_from([1, 2]))
def test_the_certifying_kinds_give_the_certification_of_the_whole_journal(
    rows: list[tuple[EntryKind, str, str]], generation: int, current: int
) -> None:
    """Random journals of every kind, their payloads naming the request or another, this lease
    or another, a call or none, any status; a claim of generation 2 mostly (the payloads'
    usual one), else 1."""
    entries = _journal([(kind.value, payload, actor) for kind, payload, actor in rows])
    chosen = [entry for entry in entries if entry.kind in KIND_NAMES]
    assert certify(chosen, EXR, generation, current) == certify(entries, EXR, generation, current)


def _row(kind: EntryKind, actor: str = HOLDER, **payload: object) -> tuple[str, str, str]:
    return kind.value, json.dumps({"execution_request_id": EXR, **payload}), actor


_CLAIMED = _row(EntryKind.WORKER_CLAIMED, lease_generation=2)
_INTENT = _row(EntryKind.TOOL_INTENT, call_id="c1", lease_generation=2)
#: For each certifying kind, a journal whose certification changes without its entries of that
#: kind: a claim, an intent, its outcome, and each lease end or marker after the claim.
_WITNESSES = {
    EntryKind.WORKER_CLAIMED: [_CLAIMED, _INTENT],
    EntryKind.TOOL_INTENT: [_CLAIMED, _INTENT],
    EntryKind.TOOL_OUTCOME: [
        _CLAIMED,
        _INTENT,
        _row(EntryKind.TOOL_OUTCOME, call_id="c1", status="succeeded", lease_generation=2),
    ],
    EntryKind.REQUEST_FAILED: [_CLAIMED, _row(EntryKind.REQUEST_FAILED, "ledger"), _INTENT],
    EntryKind.REQUEST_EVENT: [_CLAIMED, _row(EntryKind.REQUEST_EVENT, "ledger"), _INTENT],
    EntryKind.RECONCILIATION_SETTLEMENT: [_CLAIMED, _row(EntryKind.RECONCILIATION_SETTLEMENT)],
    EntryKind.RECONCILIATION_VERIFICATION: [
        _CLAIMED,
        _row(EntryKind.RECONCILIATION_VERIFICATION),
    ],
}


@pytest.mark.parametrize("left_out", [EntryKind(name) for name in sorted(KIND_NAMES)])
def test_each_certifying_kind_is_needed(left_out: EntryKind) -> None:
    entries = _journal(_WITNESSES[left_out])
    kept = [entry for entry in entries if entry.kind != left_out.value]
    assert certify(kept, EXR, 2, 2) != certify(entries, EXR, 2, 2)
