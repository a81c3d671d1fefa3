"""The replica stack of tests/scale/harness.py, started once per test module and variant:
scenarios use their own runs and reset what they depend on (the policy, the pending queue).

The variants are how the ledgers' sessions default their isolation. Under ``repeatable read``
(a role or database default an operator may have set) the policy lock's re-read would silently
miss what committed while it waited, unless the ledger sets READ COMMITTED itself (ADR 0016);
the setting goes in the replicas' connection options, never on the shared role or database.
``make test`` runs that variant, ``make scale`` both.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import postgres_schema
from tests.scale.harness import FULL, Replicas, running_replicas

#: Server settings of the ledgers' sessions, by variant.
VARIANTS = {
    "repeatable-read-default": {"default_transaction_isolation": "repeatable read"},
    "server-default": {},
}


@pytest.fixture(scope="module", params=list(VARIANTS) if FULL else ["repeatable-read-default"])
def replicas(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replicas]:
    """Two ledgers, one reconstruction and two lanes on a fresh, migrated schema."""
    variant = request.param
    with (
        postgres_schema(VARIANTS[variant]) as database_url,
        running_replicas(
            database_url, tmp_path_factory.mktemp("replicas"), variant=variant
        ) as running,
    ):
        yield running
