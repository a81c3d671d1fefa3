"""The reliability scenarios reuse the stacks of the admission and ledger tests."""

from __future__ import annotations

from tests.admission.conftest import stack
from tests.ledger.conftest import clients, clock

__all__ = ["clients", "clock", "stack"]
