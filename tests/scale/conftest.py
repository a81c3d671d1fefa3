"""The replica stack of tests/scale/harness.py, started once per test module: scenarios use
their own runs and reset what they depend on (the policy, the pending queue)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import postgres_schema
from tests.scale.harness import Replicas, running_replicas


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    """Two ledgers, one reconstruction and two lanes on a fresh, migrated schema."""
    with (
        postgres_schema() as database_url,
        running_replicas(database_url, tmp_path_factory.mktemp("replicas")) as running,
    ):
        yield running
