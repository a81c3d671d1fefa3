"""Each consumed call's grant binds its original grant, argument digest and source cut (spec:
"The proof binds each original call ID, argument digest, source cut, grant and raw response");
a missing or different one holds CALL_NOT_BOUND, and a missing grant is never taken for a read."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from services.candidate.domain import ConsumedCall, HoldReason
from tests.candidate.memory import (
    ANALYSIS,
    EVIDENCE_CALL,
    RUN,
    MemorySources,
    call_args_digest,
    chained,
    evaluator,
    held_journal,
)

LIST_CALL = "call_list_2"
# A version-2 response: the rejected evidence query and one list_files sibling.
V2_ANALYSIS = replace(
    ANALYSIS,
    tool_calls=(
        *ANALYSIS.tool_calls,
        ConsumedCall(LIST_CALL, "list_files", "read", call_args_digest(LIST_CALL)),
    ),
)


def _journal(call_id: str, change: dict[str, Any]) -> MemorySources:
    """The version-2 held run whose grant of ``call_id`` has ``change`` (None: field removed)."""
    journal = held_journal([(EVIDENCE_CALL, "read_run_evidence"), (LIST_CALL, "list_files")])
    for kind, payload in journal:
        if kind == "tool_call_granted" and payload["call_id"] == call_id:
            for key, value in change.items():
                if value is None:
                    del payload[key]
                else:
                    payload[key] = value
    return MemorySources(journal_entries=chained(journal), analysis=V2_ANALYSIS)


def test_exactly_bound_grants_are_eligible_under_version_2() -> None:
    candidate = evaluator(_journal(LIST_CALL, {})).invalid_read_continuity("run-1", version=2)
    assert candidate.eligible, candidate.holds


@pytest.mark.parametrize("call_id", [EVIDENCE_CALL, LIST_CALL])
@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"grant": None}, "records no grant"),
        ({"grant": "write"}, "was granted 'write', not 'read'"),
        ({"args_digest": None}, "records no argument digest"),
        ({"args_digest": call_args_digest("another")}, "is not the consumed response's"),
        ({"source_cut": None}, "records no source cut"),
        ({"source_cut": "git:other"}, f"not the run's source {RUN.source_revision!r}"),
    ],
    ids=["no-grant", "other-grant", "no-args", "other-args", "no-cut", "other-cut"],
)
def test_a_missing_or_different_binding_holds_call_not_bound(
    call_id: str, change: dict[str, Any], problem: str
) -> None:
    candidate = evaluator(_journal(call_id, change)).invalid_read_continuity("run-1", version=2)
    assert [(h.reason, h.subject) for h in candidate.holds] == [
        (HoldReason.CALL_NOT_BOUND, call_id)
    ]
    assert problem in candidate.holds[0].detail
    assert not candidate.eligible
