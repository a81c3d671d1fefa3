"""Every reason reconstruction can give has an explicit hold; an unknown one fails loudly."""

from __future__ import annotations

import pytest

from services.candidate.domain import HoldReason
from services.candidate.domain.checks.reconstruction_reasons import FINDING_HOLDS, REFUSAL_HOLDS
from services.reconstruction.domain import ANALYSIS_REASONS, REFUSAL_REASONS
from shared.runtime.errors import (
    DeadlineExceeded,
    DomainError,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
    Unimplemented,
)
from tests.candidate.memory import RESPONSE_DIGEST, MemorySources, evaluator, with_finding


def test_the_finding_map_covers_exactly_reconstructions_findings() -> None:
    assert set(FINDING_HOLDS) == ANALYSIS_REASONS


def test_the_refusal_map_covers_exactly_reconstructions_refusals() -> None:
    assert set(REFUSAL_HOLDS) == REFUSAL_REASONS


@pytest.mark.parametrize("reason", sorted(ANALYSIS_REASONS - {"SIBLING_CALL_REFUSED"}))
def test_each_finding_holds_with_its_mapped_reason(reason: str) -> None:
    sources = MemorySources(analysis=with_finding(reason))
    candidate = evaluator(sources).invalid_read_continuity("run-1")
    assert [(h.reason, h.subject) for h in candidate.holds] == [
        (FINDING_HOLDS[reason], "call_ev_1")
    ]
    assert candidate.holds[0].detail.startswith(f"{reason}: ")
    assert sources.reads["reconstruct"] == 0  # nothing is reconstructed past a finding


@pytest.mark.parametrize("reason", sorted(REFUSAL_REASONS))
@pytest.mark.parametrize("call", ["analyze", "reconstruct"])
def test_each_refusal_holds_with_its_mapped_reason(reason: str, call: str) -> None:
    error = FailedPrecondition(reason, "refused", metadata={"field": "/state"})
    sources = MemorySources(**{"analysis" if call == "analyze" else "reconstruction": error})
    candidate = evaluator(sources).invalid_read_continuity("run-1")
    assert [(h.reason, h.subject) for h in candidate.holds] == [(REFUSAL_HOLDS[reason], "/state")]
    assert candidate.version == 0


def test_a_refusal_naming_nothing_names_the_consumed_response() -> None:
    sources = MemorySources(analysis=InvalidArgument("CHECKPOINT_MALFORMED", "not JSON"))
    candidate = evaluator(sources).invalid_read_continuity("run-1")
    assert [(h.reason, h.subject) for h in candidate.holds] == [
        (HoldReason.MIGRATION_REFUSED, RESPONSE_DIGEST)
    ]


def test_an_unknown_finding_is_an_internal_error_not_a_guessed_hold() -> None:
    sources = MemorySources(analysis=with_finding("NEWLY_INVENTED_FINDING"))
    with pytest.raises(Internal) as caught:
        evaluator(sources).invalid_read_continuity("run-1")
    assert caught.value.reason == "RECONSTRUCTION_REASON_UNMAPPED"
    assert caught.value.metadata == {
        "reconstruction_reason": "NEWLY_INVENTED_FINDING",
        "origin": "finding",
    }


@pytest.mark.parametrize("call", ["analyze", "reconstruct"])
def test_an_unknown_refusal_holds_reconstruction_refused_naming_it(call: str) -> None:
    """A refusal is reconstruction's answer about the bytes: the operator gets a hold with its
    handoff, never an error, even for a reason this candidate does not know."""
    error = FailedPrecondition("NEWLY_INVENTED_REFUSAL", "refused", metadata={"field": "/x"})
    sources = MemorySources(**{"analysis" if call == "analyze" else "reconstruction": error})
    candidate = evaluator(sources).invalid_read_continuity("run-1")
    assert [(h.reason, h.subject) for h in candidate.holds] == [
        (HoldReason.RECONSTRUCTION_REFUSED, "/x")
    ]
    assert candidate.holds[0].detail.startswith("NEWLY_INVENTED_REFUSAL: ")
    assert not candidate.eligible and candidate.handoff is not None


@pytest.mark.parametrize("call", ["analyze", "reconstruct"])
@pytest.mark.parametrize(
    "error",
    [
        Internal("SEALED_REPLAY_FAILED", "the replay broke"),
        ResourceExhausted("RESOURCE_EXHAUSTED", "too large"),
        Unimplemented("UNIMPLEMENTED", "no such method"),
        # A mapped reason given with another code is still no typed refusal.
        Internal("CHECKPOINT_MALFORMED", "internal with a refusal's reason"),
    ],
    ids=lambda e: f"{type(e).__name__}-{e.reason}",
)
def test_every_other_failure_of_reconstruction_holds_too(call: str, error: DomainError) -> None:
    sources = MemorySources(**{"analysis" if call == "analyze" else "reconstruction": error})
    candidate = evaluator(sources).invalid_read_continuity("run-1")
    assert [h.reason for h in candidate.holds] == [HoldReason.RECONSTRUCTION_REFUSED]
    assert error.reason in candidate.holds[0].detail


@pytest.mark.parametrize(
    "error",
    [
        Unavailable("UNAVAILABLE", "down"),
        DeadlineExceeded("DEADLINE_EXCEEDED", "slow"),
        PermissionDenied("ROLE_REQUIRED", "not this service"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_transient_and_authorization_errors_are_no_refusal_and_propagate(
    error: DomainError,
) -> None:
    with pytest.raises(type(error)):
        evaluator(MemorySources(analysis=error)).invalid_read_continuity("run-1")
