"""The rejected-boundary recovery's pinned documents and corrective provider configuration, pure
(``shared.continuity.recovery.rejected_boundary.evidence``), and the authority the workflow
needs."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from shared.continuity.admissibility import check
from shared.continuity.admissibility_facts import Consumed, Situation, Unresolved
from shared.continuity.canonical import sha256_digest
from shared.continuity.recovery.rejected_boundary.custody import (
    REQUIRED_ROLES,
    ReviewedRejection,
    rejected_boundary_facts,
)
from shared.continuity.recovery.rejected_boundary.evidence import (
    CorrectiveProvider,
    corrective_problems,
    report_problems,
)
from shared.continuity.request_history import request_history
from shared.runtime.errors import InvalidArgument
from tests.shared.continuity.test_rejected_boundary import (
    CLAIMED,
    FAILED,
    REVIEW,
    SENT,
    SETTLED,
    rows,
)

FACTS = {
    "source_revision": REVIEW.source_revision,
    "executable_identity": "x",
    "provider_epoch": "e",
}


def stored(*documents: dict[str, object]) -> tuple[dict[str, bytes], list[str]]:
    blobs = {}
    for document in documents:
        content = json.dumps(document).encode()
        blobs[sha256_digest(content)] = content
    return blobs, list(blobs)


def with_reports(
    validator: dict[str, object], probe: dict[str, object]
) -> tuple[dict[str, bytes], ReviewedRejection]:
    blobs, digests = stored(validator, probe)
    review = replace(
        REVIEW,
        executable_identity="x",
        provider_epoch="e",
        source_validator_report_digest=digests[0],
        executable_probe_report_digest=digests[1],
    )
    return blobs, review


def test_matching_reports_have_no_problem() -> None:
    blobs, review = with_reports(
        {"kind": "source_validator_report", **FACTS}, {"kind": "executable_probe_report", **FACTS}
    )
    assert report_problems(review, blobs.get) == ()


@pytest.mark.parametrize(
    "fact", ["kind", "source_revision", "executable_identity", "provider_epoch"]
)
def test_a_report_made_for_something_else_is_a_problem(fact: str) -> None:
    probe = {"kind": "executable_probe_report", **FACTS, fact: "other"}
    blobs, review = with_reports({"kind": "source_validator_report", **FACTS}, probe)
    problems = report_problems(review, blobs.get)
    assert [(p.field, p.missing) for p in problems] == [("executable_probe_report_digest", False)]


def test_a_report_not_stored_intact_is_missing() -> None:
    blobs, review = with_reports(
        {"kind": "source_validator_report", **FACTS}, {"kind": "executable_probe_report", **FACTS}
    )
    tampered = {d: (b"{}" if "probe" not in c.decode() else c) for d, c in blobs.items()}
    problems = report_problems(review, tampered.get)
    assert [(p.field, p.missing) for p in problems] == [("source_validator_report_digest", True)]
    assert [p.missing for p in report_problems(review, {}.get)] == [True, True]


CONFIGURATION = {
    "kind": "corrective_provider_configuration",
    "provider_epoch": "e2",
    "replaces_provider_epoch": REVIEW.provider_epoch,
    "model": REVIEW.model,
}


def test_the_corrective_configuration_must_name_both_epochs_and_the_model() -> None:
    blobs, [digest] = stored(CONFIGURATION)
    corrective = CorrectiveProvider("e2", digest)
    assert corrective_problems(corrective, REVIEW, blobs.get) == ()
    for name in ("kind", "provider_epoch", "replaces_provider_epoch", "model"):
        blobs, [digest] = stored({**CONFIGURATION, name: "other"})
        problems = corrective_problems(CorrectiveProvider("e2", digest), REVIEW, blobs.get)
        assert [p.missing for p in problems] == [False], name
    assert [p.missing for p in corrective_problems(corrective, REVIEW, {}.get)] == [True]


@pytest.mark.parametrize(
    "corrective",
    [
        CorrectiveProvider(REVIEW.provider_epoch, sha256_digest(b"c")),
        CorrectiveProvider("", sha256_digest(b"c")),
        CorrectiveProvider("e2", "sha256:nope"),
    ],
)
def test_a_malformed_corrective_configuration_is_invalid(corrective: CorrectiveProvider) -> None:
    with pytest.raises(InvalidArgument) as refused:
        corrective.validate(REVIEW)
    assert refused.value.reason == "CORRECTIVE_PROVIDER_INVALID"


def test_the_workflow_needs_administrator_and_execution_authority() -> None:
    assert {"factory_administrator", "execution_operator"} == REQUIRED_ROLES
    history = request_history(rows(*SETTLED, CLAIMED, SENT, FAILED), "req-1")
    facts = rejected_boundary_facts(
        history,
        (),
        Situation(
            state="failed",
            outstanding=(),
            workflow_enabled=True,
            actor=history.original_actor,
            actor_has_authority=False,
            consumed=Consumed(),
        ),
    )
    outcome = check(facts)
    assert isinstance(outcome, Unresolved)
    [refusal] = outcome.refusals
    assert refusal.hold == "AUTHORITY_MISSING"
    assert "factory administrator and execution authority" in refusal.detail
