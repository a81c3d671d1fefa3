"""The worker path's steps and one journal append counted like an admission
(bench/hops_worker.py, issue 50 §2) on real PostgreSQL. Counts are exact, so the tables
docs/performance.md shows are pinned here: a change that brings back a repeat (a parse, a token
digest, a statement) on a step or an append fails this test until the table is updated."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.hops_worker import count_appends, count_worker_path, table
from services.ledger.database import make_engine
from tests.conftest import postgres_schema

STEPS = ("claim", "intent", "record", "outcome", "complete")


@pytest.fixture(scope="module")
def counted() -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    with postgres_schema() as url:
        engine = make_engine(url)
        try:
            yield count_worker_path(engine, requests=2), count_appends(engine, appends=4)
        finally:
            engine.dispose()


def _ledger(worker: dict[str, Any], kind: str) -> dict[str, float]:
    return {step: worker["steps"][step]["work"]["ledger"][kind] for step in STEPS}


def test_each_step_makes_its_one_call_and_the_claim_reads_the_run_first(
    counted: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    worker, _ = counted
    calls = {
        step: {hop: c["calls"] for hop, c in worker["steps"][step]["hops"].items()}
        for step in STEPS
    }
    assert calls == {
        "claim": {"worker -> GetRun": 1, "worker -> ClaimExecutionRequest": 1},
        "intent": {"worker -> AppendJournalEntry": 1},
        "record": {"worker -> RecordCommand": 1},
        "outcome": {"worker -> AppendJournalEntry": 1},
        "complete": {"worker -> CompleteExecutionRequest": 1},
    }


def test_statements_per_step_beside_the_statement_floor(
    counted: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    worker, _ = counted
    # GetRun reads the run, its head and the policy in one statement (three before round 5);
    # the claim's transaction runs five, each own record, command charge and completion five (a
    # completion ran six while its certification read the journal since the ownership claim
    # again; it now certifies from the effects' statement). Each write's statement stores its
    # signed head too (ADR 0060; one statement more each before).
    assert _ledger(worker, "statements") == {
        "claim": 6,
        "intent": 5,
        "record": 5,
        "outcome": 5,
        "complete": 5,
    }
    assert _ledger(worker, "signatures made") == dict.fromkeys(STEPS, 1)
    assert worker["statements_per_step"] == 5.12  # 41 over the eight steps, to two places
    assert worker["statement_floor"] == 5  # the floor the figure is judged against
    assert all(
        worker["steps"][step]["work"][scope]["statements"] == 0
        for step in STEPS
        for scope in worker["steps"][step]["work"]
        if scope != "ledger"
    )


def test_each_payload_is_parsed_once_and_each_call_hashes_its_token_twice(
    counted: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    worker, _ = counted
    # Before round 5: 14, 8, 15.5, 8 and 15 (a worker record's payload parsed five times, the
    # judged entries once per rule that read them). The completion parsed 10 while it certified
    # from every entry since the ownership claim (the command charges' entries too).
    assert _ledger(worker, "JSON parsed") == {
        "claim": 7,
        "intent": 4.5,
        "record": 15,
        "outcome": 4.5,
        "complete": 8,
    }
    # The claim hashes the entry it appends and the two ticket rows it re-verifies, every other
    # step only its entry; and each the signed head it chains to. Besides, every call's bearer
    # token is hashed twice (gate and call policy; kept, ADR 0062): the claim step is two calls
    # (the claim and the worker's GetRun).
    assert _ledger(worker, "SHA-256 digests") == {
        "claim": 4 + 4,
        "intent": 2 + 2,
        "record": 2 + 2,
        "outcome": 2 + 2,
        "complete": 2 + 2,
    }
    intent = worker["steps"]["intent"]["sites"]
    assert sum(n for site, n in intent.items() if site.startswith("ledger: JSON parsed")) == 4.5
    assert [site for site in intent if "journal.py:_check" in site] == []
    claim = worker["steps"]["claim"]["sites"]
    # the two judged entries, parsed once for the three rules and the custody check that read
    # them (eight before), and run_started, once for the epoch and the source check (two)
    assert (
        claim["ledger: JSON parsed at journal.py:payload_of via canonical.py:_compact_parse"] == 3
    )
    assert [site for site in claim if "queued_at" in site or "_payload" in site] == []
    assert "| claim ledger |" in table(*counted)


def test_an_append_costs_one_statement_two_parses_and_one_signature(
    counted: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    _, appends = counted
    ledger = appends["work"]["ledger"]
    # the signed head rides in the append's statement (ADR 0060; its own INSERT before)
    assert (ledger["statements"], ledger["transactions"], ledger["signatures made"]) == (1, 1, 1)
    # the payload sent, validated and made canonical, and the canonical text the seal hashes;
    # the entry's hash and the signed head's previous head, and the bearer token twice (gate and
    # call policy)
    assert (ledger["JSON parsed"], ledger["SHA-256 digests"]) == (2, 2 + 2)
    assert (ledger["protobuf parsed"], ledger["protobuf serialized"]) == (1, 1)
    # the run noted, the entry inserted after the head this process appended last and its
    # signed head stored, in one statement, as the baseline the figure is set beside
    assert appends["statements"]["ledger"] == {"WITH": 1}
