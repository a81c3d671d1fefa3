"""Who asks for a recovery candidate: the caller's current authority as the candidate judges it
(the ledger asks again inside the commit transaction)."""

from __future__ import annotations

import pytest

from services.candidate.servicer import _caller
from shared.runtime.auth import Principal, Role, reset_current_principal, set_current_principal


@pytest.mark.parametrize(
    "roles, administrator, execution",
    [
        ({Role.FACTORY_ADMINISTRATOR, Role.EXECUTION_OPERATOR}, True, True),
        ({Role.FACTORY_ADMINISTRATOR}, True, False),
        ({Role.EXECUTION_OPERATOR}, False, True),
    ],
)
def test_the_caller_carries_both_authorities(
    roles: set[Role], administrator: bool, execution: bool
) -> None:
    token = set_current_principal(Principal("ada", frozenset(roles)))
    try:
        caller = _caller()
    finally:
        reset_current_principal(token)
    assert (caller.has_authority, caller.has_execution_authority) == (administrator, execution)
    assert not caller.recomputing
