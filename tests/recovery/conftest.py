"""The four services over one ledger whose authority source the tests can change at runtime."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

import grpc
import pytest
from sqlalchemy import Engine

from services.demo.provider import RefusingProvider
from services.ledger.service import Ledger
from tests.admission.conftest import (
    rpc_reason,
    stack,  # noqa: F401 - the four services, over `ledger`
)
from tests.support import TOKENS

T = TypeVar("T")


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


def race_two_ids(submit: Callable[[str], T], prefix: str) -> tuple[list[T], list[str]]:
    """Two submissions under the ids ``<prefix>-0`` and ``<prefix>-1`` released together: (the
    responses, the reasons of the refused ones)."""
    results: dict[str, T | str] = {}
    barrier = threading.Barrier(2)

    def one(action_id: str) -> None:
        barrier.wait()
        try:
            results[action_id] = submit(action_id)
        except grpc.RpcError as error:
            results[action_id] = rpc_reason(error)

    threads = [threading.Thread(target=one, args=(f"{prefix}-{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won: list[T] = [r for r in results.values() if not isinstance(r, str)]
    lost = [r for r in results.values() if isinstance(r, str)]
    return won, lost
