"""The derived checkpoint's top-level keys are declared twice on purpose: the ledger's inspection
reads ``sdk_epochs.DERIVED_KEYS`` without importing the agent layer, and the agent's envelope
checks a record's shape against ``envelope.DERIVED``. They must name the same keys (what the
writer writes is pinned by tests/reconstruction/test_derived_format.py's golden digests)."""

from __future__ import annotations

from shared.agent.envelope import DERIVED
from shared.continuity.sdk_epochs import DERIVED_KEYS


def test_the_envelope_shape_and_the_inspections_key_set_name_the_same_keys() -> None:
    assert frozenset(DERIVED) == DERIVED_KEYS
