"""The per-hop accounting of an admission (bench/hops.py, issue 50 §2) on real PostgreSQL: what
it counts is exact, so the figures docs/performance.md shows are pinned here; a change that adds
a hop, a statement or a transaction to an admission fails this test until the table is updated."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.hops import count_admissions, table
from services.ledger.database import make_engine
from tests.conftest import postgres_schema


@pytest.fixture(scope="module")
def accounted() -> Iterator[dict[str, Any]]:
    with postgres_schema() as url:
        engine = make_engine(url)
        try:
            yield count_admissions(engine, admissions=3)
        finally:
            engine.dispose()


def test_each_boundary_is_crossed_once_per_admission(accounted: dict[str, Any]) -> None:
    # The operator's call, admission's candidate read and commit, the candidate's one ledger
    # read; reconstruction is not asked again (ADR 0028: the operator's read computed it).
    assert {hop: counts["calls"] for hop, counts in accounted["hops"].items()} == {
        "admission -> CommitAdmission": 1,
        "admission -> GetInvalidReadContinuityCandidate": 1,
        "candidate -> GetRunSnapshot": 1,
        "operator -> RequestInvalidReadContinuity": 1,
    }
    assert all(counts["request bytes"] > 0 for counts in accounted["hops"].values())


def test_an_admission_costs_two_transactions_five_statements_and_one_signature(
    accounted: dict[str, Any],
) -> None:
    ledger = accounted["work"]["ledger"]
    assert (ledger["transactions"], ledger["statements"]) == (2, 5)
    assert ledger["signatures made"] == 1
    # the signed head rides in the admission's one write (ADR 0060; its own INSERT before)
    assert accounted["statements"]["ledger"] == {"SELECT": 4, "WITH": 1}
    # Only the ledger owns the database.
    others = [scope for scope in accounted["work"] if scope != "ledger"]
    assert all(accounted["work"][scope]["statements"] == 0 for scope in others)


def test_every_service_parses_each_message_it_receives_once(accounted: dict[str, Any]) -> None:
    work = accounted["work"]
    # admission: its request and its two answers; candidate: its request, the ledger's answer,
    # and the snapshot's one stored document; ledger: its two requests.
    assert [work[s]["protobuf parsed"] for s in ("admission", "candidate", "ledger")] == [3, 3, 2]
    assert "| ledger |" in table(accounted)


def test_the_ledger_parses_each_judged_payload_once_and_each_call_hashes_its_token_twice(
    accounted: dict[str, Any],
) -> None:
    # Round 5 removed a repeat: the commit parsed the newest model_request_sent and
    # response_consumed payloads once per check that read them (4 parses, now 2).
    sites = accounted["sites"]
    assert (
        sum(s["count"] for site, s in sites.items() if "admission.py" in site and "JSON" in site)
        == 2
    )
    # Kept (ADR 0062): each service hashes the bearer token of every call it receives twice, at
    # the gate and in the call policy (about 1.5 us each); the ledger receives two calls.
    tokens = {site.split(":")[0]: s["count"] for site, s in sites.items() if "token_digest" in site}
    assert tokens == {"admission": 2, "candidate": 2, "ledger": 4}
    digests = {
        s: accounted["work"][s]["SHA-256 digests"] for s in ("admission", "candidate", "ledger")
    }
    # The candidate: the two closure blobs' digests and the answer cache's key (ADR 0028); the
    # admission's candidate evaluates nothing after the operator's read of the same facts (ADR
    # 0066), so it writes no digest document and parses only the closure's three payloads.
    assert digests == {"admission": 2 + 2, "candidate": 3 + 2, "ledger": 9 + 4}
    candidate = accounted["work"]["candidate"]
    assert (candidate["JSON written"], candidate["JSON parsed"]) == (0, 3)
    assert accounted["work"]["ledger"]["JSON parsed"] == 8
