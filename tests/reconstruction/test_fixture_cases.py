"""Every committed case gives its expected outcome: eligible, or the typed refusal naming the
field or element it breaks."""

from __future__ import annotations

import json

import pytest

from services.reconstruction.domain import reconstruct_invalid_read
from shared.runtime.errors import DomainError, FailedPrecondition
from tests.reconstruction.conftest import MANIFEST, load_case

ELIGIBLE = sorted(n for n, e in MANIFEST.items() if e["expect"]["outcome"] == "eligible")
REFUSED = sorted(n for n, e in MANIFEST.items() if e["expect"]["outcome"] == "refused")


def test_there_is_one_refused_case_per_rule() -> None:
    reasons = {MANIFEST[n]["expect"]["reason"] for n in REFUSED}
    assert {
        "MIGRATION_FIELD_REFUSED",
        "MIGRATION_COUNTER_MISSING",
        "MIGRATION_COUNTER_UNEXPECTED",
        "MIGRATION_COUNTER_OUT_OF_BOUNDS",
        "SDK_TRANSITION_UNSUPPORTED",
        "CONTRACT_MIGRATION_REFUSED",
        "HISTORICAL_IDENTITY_UNREGISTERED",
        "CHECKPOINT_DIGEST_MISMATCH",
        "SIBLING_CALL_REFUSED",
        "UNKNOWN_TOOL_CALL",
        "UNSUPPORTED_RESPONSE_CONTENT",
        "EVIDENCE_QUERY_VALID",
    } <= reasons
    assert len(ELIGIBLE) >= 4


@pytest.mark.parametrize("name", ELIGIBLE)
def test_eligible_cases_reconstruct(name: str) -> None:
    case = load_case(name)
    result = reconstruct_invalid_read(
        case.checkpoint, case.raw_response, case.version, case.consumed_at
    )
    derived = json.loads(result.derived_checkpoint)
    assert derived["reconstruction"]["version"] == case.version
    assert derived["compatibility"]["transition"]["from"]["pydantic_ai"] == "2.58.0"
    assert derived["compatibility"]["transition"]["to"]["pydantic_ai"] == "2.55.0"


@pytest.mark.parametrize("name", REFUSED)
def test_refused_cases_name_their_field_or_element(name: str) -> None:
    case = load_case(name)
    with pytest.raises(DomainError) as caught:
        reconstruct_invalid_read(case.checkpoint, case.raw_response, case.version, case.consumed_at)
    error = caught.value
    assert isinstance(error, FailedPrecondition)
    assert error.reason == case.expect["reason"]
    assert error.metadata == case.expect["metadata"]
    name_in_message = next(iter(case.expect["metadata"].values()))
    assert name_in_message in error.message or error.metadata
