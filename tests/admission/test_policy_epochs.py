"""Historical policy epochs through the four real services, SQLite and PostgreSQL."""

from __future__ import annotations

import json

from forge.continuity.v1 import common_pb2
from services.demo.seed import HISTORICAL_CHECKPOINT_MODE, load_fixture, seed_held_run
from tests.admission.conftest import Stack, submission
from tests.support import whole_journal

FIXTURE = load_fixture("v1_basic")


def test_the_historical_adoption_is_admitted_with_its_receipt(stack: Stack) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    candidate = stack.candidate_of("run-1")
    assert candidate.eligible, candidate.holds
    stack.admissions().RequestInvalidReadContinuity(submission(candidate))
    entries = whole_journal(stack.ledger_stub("reader-token"), "run-1")
    settlement = next(
        e for e in entries if e.kind == common_pb2.JOURNAL_ENTRY_KIND_MIGRATION_SETTLEMENT
    )
    epochs = json.loads(settlement.payload_json)["policy_epochs"]
    assert epochs["adopted_epoch"]["mode"] == HISTORICAL_CHECKPOINT_MODE["mode"]


def test_an_uncatalogued_adoption_holds_the_candidate(stack: Stack) -> None:
    adoption = {**HISTORICAL_CHECKPOINT_MODE, "selection": "latest"}
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1", checkpoint_mode=adoption)
    stack.set_policy()
    candidate = stack.candidate_of("run-1")
    assert not candidate.eligible
    found = [(h.reason, h.subject) for h in candidate.holds]
    assert (common_pb2.HOLD_REASON_IDENTITY_UNREGISTERED, "1/checkpoint_mode") in found
