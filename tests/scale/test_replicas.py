"""Issue 21 §1: two ledger replicas on one PostgreSQL schema, each behind its own lane of
candidate and admission processes, with the same work raced across both (docs/reliability.md,
"Replicas"). ``make scale`` runs the full counts, under the server's default isolation and under
a REPEATABLE READ connection default; ``make test`` a fast slice under the latter (tests/scale/
conftest.py)."""

from __future__ import annotations

import pytest

from tests.scale import admission_scenarios as admissions
from tests.scale import execution_scenarios as execution
from tests.scale import freeze_scenarios as freeze
from tests.scale.conftest import VARIANTS
from tests.scale.harness import Replicas


def test_identical_admissions_across_lanes_make_one_ticket(replicas: Replicas) -> None:
    admissions.identical_admissions(replicas)


def test_one_consumed_graph_gets_one_ticket_whoever_asks(replicas: Replicas) -> None:
    admissions.one_graph_many_identities(replicas)


def test_the_pending_cap_holds_across_replicas(replicas: Replicas) -> None:
    admissions.pending_cap(replicas)


@pytest.mark.parametrize("through", ["admission", "ledger"])
def test_no_admission_sent_after_a_revocation_on_the_other_replica_is_accepted(
    replicas: Replicas, through: str
) -> None:
    admissions.revocation_during_flood(replicas, through=through)


def test_a_claim_and_its_lease_are_fenced_across_replicas(replicas: Replicas) -> None:
    execution.claim_and_fencing_across_replicas(replicas)


def test_a_follower_on_one_replica_sees_every_append_made_through_the_other(
    replicas: Replicas,
) -> None:
    execution.follower_across_replicas(replicas)


def test_sigkill_of_one_replica_mid_flood_loses_and_duplicates_nothing(replicas: Replicas) -> None:
    execution.sigkill_during_flood(replicas)


def test_a_frozen_lock_holder_stalls_the_other_replica_only_within_the_bound(
    replicas: Replicas,
) -> None:
    freeze.frozen_lock_holder(replicas)


def test_the_replicas_sessions_carry_the_variants_isolation_default(replicas: Replicas) -> None:
    """The ledgers connect with the URL of this engine: under the repeatable-read variant every
    session of theirs defaults to REPEATABLE READ, and their writes still run at READ COMMITTED
    because the ledger sets it per transaction (ADR 0016)."""
    expected = VARIANTS[replicas.variant].get("default_transaction_isolation", "read committed")
    with replicas.engine.connect() as connection:
        shown = connection.exec_driver_sql("SHOW default_transaction_isolation").scalar_one()
    assert shown == expected
