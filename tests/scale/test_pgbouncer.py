"""The replica scenarios once through a real PgBouncer in transaction mode (issue 21 §2): both
ledgers reach the schema through one bouncer, with server-side prepares off
(FORGE_DB_SERVER_PREPARES=off, ADR 0016), and every invariant holds as it does directly
(tests/scale/pgbouncer.py starts the bouncer)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import postgres_schema
from tests.scale import admission_scenarios as admissions
from tests.scale import execution_scenarios as execution
from tests.scale.harness import FULL, Replicas, report, running_replicas
from tests.scale.pgbouncer import SERVER_POOL, Bouncer, running_pgbouncer


@pytest.fixture(scope="module")
def bouncer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Bouncer, str]]:
    with postgres_schema() as database_url:
        workdir = tmp_path_factory.mktemp("pgbouncer")
        with running_pgbouncer(database_url, workdir) as running:
            yield running, database_url


@pytest.fixture(scope="module")
def replicas(
    bouncer: tuple[Bouncer, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replicas]:
    running, database_url = bouncer
    with running_replicas(
        database_url,
        tmp_path_factory.mktemp("replicas"),
        variant="pgbouncer",
        ledger_url=running.url,
        ledger_env={"FORGE_DB_SERVER_PREPARES": "off"},
    ) as started:
        yield started


def test_identical_admissions_through_pgbouncer(replicas: Replicas) -> None:
    admissions.identical_admissions(replicas)


def test_one_consumed_graph_through_pgbouncer(replicas: Replicas) -> None:
    admissions.one_graph_many_identities(replicas)


def test_the_pending_cap_through_pgbouncer(replicas: Replicas) -> None:
    admissions.pending_cap(replicas)


# The fast slice sends the flood straight to the ledger only (the path through the policy lock);
# make scale both ways, as test_replicas.py does in every slice.
@pytest.mark.parametrize("through", ["admission", "ledger"] if FULL else ["ledger"])
def test_no_admission_after_a_revocation_through_pgbouncer(
    replicas: Replicas, through: str
) -> None:
    admissions.revocation_during_flood(replicas, through=through)


def test_claim_and_fencing_through_pgbouncer(replicas: Replicas) -> None:
    execution.claim_and_fencing_across_replicas(replicas)


def test_journal_follower_through_pgbouncer(replicas: Replicas) -> None:
    execution.follower_across_replicas(replicas)


def test_sigkill_of_one_replica_through_pgbouncer(replicas: Replicas) -> None:
    execution.sigkill_during_flood(replicas)


def test_the_ledgers_traffic_went_through_pgbouncer_in_shared_sessions(
    replicas: Replicas, bouncer: tuple[Bouncer, str]
) -> None:
    """The scenarios above did run through the bouncer, on fewer server sessions than the two
    replicas' pools could open (transactions from both replicas shared server sessions)."""
    running, _ = bouncer
    transactions = running.transactions()
    servers = [row for row in running.show("SERVERS") if row["database"] == "forge"]
    assert transactions > 0
    assert 0 < len(servers) <= SERVER_POOL
    report("replicas_pgbouncer", transactions=transactions, server_sessions=len(servers))
