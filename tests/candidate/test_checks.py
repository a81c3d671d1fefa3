"""Facts are gathered once; checks are pure functions of them, independent of their order."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pytest

from services.candidate.domain import (
    INVALID_READ_CONTINUITY,
    ExecutionRecord,
    ExecutionState,
    Facts,
    HoldReason,
    gather_facts,
)
from services.candidate.domain.workflows import holds_of
from shared.continuity.canonical import sha256_digest
from shared.runtime.errors import FailedPrecondition
from tests.candidate.memory import (
    CHECKPOINT_DIGEST,
    EVIDENCE_CALL,
    MemorySources,
    chained,
    evaluator,
    held_journal,
    with_finding,
)


def test_an_intact_held_run_is_eligible_with_its_proof() -> None:
    candidate = evaluator(MemorySources()).invalid_read_continuity("run-1", 2)
    assert candidate.eligible
    assert candidate.version == 2
    assert candidate.proof.derived_checkpoint_digest == "sha256:" + "1" * 64
    assert candidate.proof.call_id == EVIDENCE_CALL


def test_every_source_is_read_once() -> None:
    sources = MemorySources()
    evaluator(sources).invalid_read_continuity("run-1")
    assert sources.reads == Counter(
        run=1,
        journal=1,
        verify=1,
        policy=1,
        execution_requests=1,
        blob=2,
        analyze=1,
        reconstruct=1,
    )


def _facts(sources: MemorySources, version: int = 1) -> Facts:
    return gather_facts(sources, "run-1", version, qualified=lambda _: False)


# Facts under which several checks hold at once.
SCENARIOS = {
    "eligible": MemorySources(),
    "finding and disabled policy": MemorySources(
        analysis=with_finding("EVIDENCE_QUERY_VALID"),
        policy_record=dataclasses.replace(MemorySources().policy_record, enabled=False),
    ),
    "analysis refused": MemorySources(analysis=FailedPrecondition("MIGRATION_FIELD_REFUSED", "x")),
    "blobs missing, unmatched grants": MemorySources(
        journal_entries=chained(held_journal([("call_other", "list_files")])), blobs={}
    ),
    "extra grant, nothing held": MemorySources(
        journal_entries=chained(
            held_journal([(EVIDENCE_CALL, "read_run_evidence"), ("call_x", "run_command")])[:-1]
        )
    ),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_checks_do_not_depend_on_their_order(name: str) -> None:
    facts = _facts(SCENARIOS[name])
    forward = holds_of(INVALID_READ_CONTINUITY, facts)
    backward = holds_of(
        dataclasses.replace(INVALID_READ_CONTINUITY, checks=INVALID_READ_CONTINUITY.checks[::-1]),
        facts,
    )
    assert set(forward) == set(backward)
    assert holds_of(INVALID_READ_CONTINUITY, facts) == forward  # same facts, same holds
    for check in INVALID_READ_CONTINUITY.checks:
        assert check(facts) == check(facts)


def test_facts_are_frozen() -> None:
    facts = _facts(MemorySources())
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.version = 2  # type: ignore[misc]


def test_an_outstanding_claim_holds_with_the_contracts_pending_states() -> None:
    sources = MemorySources()
    claims = [
        ExecutionRecord("exr-1", "request-1", ExecutionState.QUEUED),
        ExecutionRecord("exr-2", "request-2", ExecutionState.CLAIMED),
        ExecutionRecord("exr-3", "request-3", ExecutionState.COMPLETED),
    ]
    facts = dataclasses.replace(_facts(sources), executions=tuple(claims), qualified=True)
    assert [(h.reason, h.subject) for h in holds_of(INVALID_READ_CONTINUITY, facts)] == [
        (HoldReason.CLAIM_OUTSTANDING, "exr-1"),
        (HoldReason.CLAIM_OUTSTANDING, "exr-2"),
    ]


def test_without_an_analysis_the_consumed_response_is_not_parsed_by_the_candidate() -> None:
    """Only reconstruction's SDK parse says which calls the response holds. With the checkpoint
    blob missing there is no analysis, so the grants cannot be matched to calls: the candidate is
    held for the missing blob, and the response's JSON (here naming another call than the grant)
    is not read by the candidate itself."""
    response = json.dumps(
        {"choices": [{"message": {"tool_calls": [{"id": "call_a", "function": {"name": "x"}}]}}]}
    ).encode()
    digest = sha256_digest(response)
    sources = MemorySources(
        journal_entries=chained(held_journal(response_digest=digest)), blobs={digest: response}
    )
    facts = _facts(sources)
    assert facts.response == response
    assert facts.analysis is None
    assert facts.calls is None
    candidate = evaluator(sources).invalid_read_continuity("run-1")
    assert [(h.reason, h.subject) for h in candidate.holds] == [
        (HoldReason.CLOSURE_INCOMPLETE, CHECKPOINT_DIGEST)
    ]
    assert sources.reads["analyze"] == 0
