"""The ledger's PostgreSQL settings come from FORGE_DB_* variables; a malformed one stops the
process at start-up with the variable's name instead of serving with a guess."""

from __future__ import annotations

import pytest

from shared.runtime.config import (
    DATABASE_VARIABLES,
    DatabaseSettings,
    database_settings,
    load_settings,
)
from shared.runtime.environment import ENVIRONMENT


def test_every_database_setting_is_a_documented_variable() -> None:
    assert set(DATABASE_VARIABLES) == set(DatabaseSettings.__dataclass_fields__)
    assert set(DATABASE_VARIABLES.values()) <= set(ENVIRONMENT)


def test_unset_variables_keep_the_defaults_and_set_ones_are_read() -> None:
    assert database_settings({}) == DatabaseSettings()
    env = {
        "FORGE_DB_POOL_SIZE": "4",
        "FORGE_DB_MAX_OVERFLOW": "0",
        "FORGE_DB_SERVER_PREPARES": "off",
        "FORGE_DB_LOCK_TIMEOUT_MS": "250",
        "FORGE_DB_STATEMENT_TIMEOUT_MS": "0",
        "FORGE_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS": "1000",
        "FORGE_DB_KEEPALIVE_IDLE_SECONDS": "0",
    }
    assert database_settings(env) == DatabaseSettings(
        pool_size=4,
        max_overflow=0,
        server_prepares=False,
        lock_timeout_ms=250,
        statement_timeout_ms=0,
        idle_in_transaction_timeout_ms=1000,
        keepalive_idle_seconds=0,
    )
    assert load_settings("ledger", [], env).database == database_settings(env)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("FORGE_DB_POOL_SIZE", "0"),
        ("FORGE_DB_POOL_SIZE", "ten"),
        ("FORGE_DB_MAX_OVERFLOW", "-1"),
        ("FORGE_DB_LOCK_TIMEOUT_MS", "5s"),
        ("FORGE_DB_SERVER_PREPARES", "maybe"),
    ],
)
def test_a_malformed_setting_is_refused_by_name(variable: str, value: str) -> None:
    with pytest.raises(ValueError, match=variable):
        database_settings({variable: value})
