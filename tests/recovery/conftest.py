"""The four services over one ledger whose authority source the tests can change at runtime."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from services.demo.provider import RefusingProvider
from services.ledger.service import Ledger
from tests.admission.conftest import stack  # noqa: F401 - the four services, over `ledger`
from tests.support import TOKENS


class Authority:
    """Current roles by identity, from the test principals; ``revoke`` takes one away now."""

    def __init__(self) -> None:
        self.roles = {identity: frozenset(roles) for identity, roles in TOKENS.values()}

    def __call__(self, identity: str) -> frozenset[str]:
        return self.roles.get(identity, frozenset())

    def revoke(self, identity: str, role: str) -> None:
        self.roles[identity] = self.roles[identity] - {role}

    def grant(self, identity: str, role: str) -> None:
        self.roles[identity] = self.roles.get(identity, frozenset()) | {role}


@pytest.fixture
def authority() -> Authority:
    return Authority()


@pytest.fixture
def ledger(engine: Engine, authority: Authority) -> Ledger:
    return Ledger(engine, authority=authority)


@pytest.fixture(scope="module")
def provider() -> Iterator[RefusingProvider]:
    """A loopback provider that refuses every request and keeps the bytes it received."""
    with RefusingProvider() as running:
        yield running
