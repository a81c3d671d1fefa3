"""The submit driver's pipeline with an in-memory workflow: no services, no database."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pytest

from forge.continuity.v1 import common_pb2
from services.admission.domain import HoldView
from services.admission.driver import Stored, Submitted, submit
from shared.continuity.idempotency import StoredAction
from shared.runtime.errors import (
    Aborted,
    Conflict,
    DomainError,
    FailedPrecondition,
    InvalidArgument,
)

DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64


@dataclass(frozen=True)
class Request:
    action_id: str
    content_digest: str
    digests: Mapping[str, str]


@dataclass(frozen=True)
class Candidate:
    digests: Mapping[str, str]
    eligible: bool = True
    holds: Sequence[HoldView] = ()
    handoff: common_pb2.HandoffPayload | None = None


@dataclass
class FakeWorkflow:
    """Records the steps it ran; ``stored`` answers read backs in order (the last repeats)."""

    id_field: str = "request_id"
    stored: list[Stored[str] | None] = field(default_factory=lambda: [None])
    current: Candidate = field(default_factory=lambda: Candidate({"candidate_digest": DIGEST_A}))
    commit_refusal: DomainError | None = None
    invalid: bool = False
    steps: list[str] = field(default_factory=list)

    def validate(self, request: Request) -> None:
        self.steps.append("validate")
        if self.invalid:
            raise InvalidArgument("FIELD_INVALID", "bad")

    def read_back(self, request: Request) -> Stored[str] | None:
        self.steps.append("read_back")
        return self.stored.pop(0) if len(self.stored) > 1 else self.stored[0]

    def candidate(self, request: Request) -> Candidate:
        self.steps.append("candidate")
        return self.current

    def commit(self, request: Request, identity: str, candidate: Candidate) -> Submitted[str]:
        self.steps.append("commit")
        if self.commit_refusal is not None:
            raise self.commit_refusal
        return Submitted(f"result of {request.action_id} by {identity}", created=True)


REQUEST = Request("req-1", "content-1", {"candidate_digest": DIGEST_A})


def stored(identity: str = "olga", content: str = "content-1") -> Stored[str]:
    return Stored("stored result", StoredAction(identity, content))


def test_a_new_request_runs_every_step_and_is_created() -> None:
    workflow = FakeWorkflow()
    assert submit(workflow, REQUEST, "olga") == Submitted("result of req-1 by olga", created=True)
    assert workflow.steps == ["validate", "candidate", "commit"]


def test_validation_comes_before_any_read() -> None:
    workflow = FakeWorkflow(invalid=True)
    with pytest.raises(InvalidArgument):
        submit(workflow, REQUEST, "olga")
    assert workflow.steps == ["validate"]


# A repeat's candidate moved when the stored submission committed (ADR 0024: no read first).
MOVED = Candidate({"candidate_digest": DIGEST_B})


def test_an_identical_repeat_returns_the_stored_result() -> None:
    workflow = FakeWorkflow(stored=[stored()], current=MOVED)
    assert submit(workflow, REQUEST, "olga") == Submitted("stored result", created=False)
    assert workflow.steps == ["validate", "candidate", "read_back"]


@pytest.mark.parametrize(
    ("id_field", "holder", "content", "reason"),
    [
        ("request_id", "otto", "content-1", "REQUEST_ID_OWNED_BY_ANOTHER_IDENTITY"),
        ("request_id", "olga", "content-2", "REQUEST_ID_CONFLICT"),
        # A recovery workflow plugs in with its own key; the reasons follow the key's name.
        ("recovery_id", "otto", "content-1", "RECOVERY_ID_OWNED_BY_ANOTHER_IDENTITY"),
        ("recovery_id", "olga", "content-2", "RECOVERY_ID_CONFLICT"),
    ],
)
def test_another_identity_or_other_content_under_the_key_conflicts(
    id_field: str, holder: str, content: str, reason: str
) -> None:
    workflow = FakeWorkflow(id_field=id_field, stored=[stored(holder, content)], current=MOVED)
    with pytest.raises(Conflict) as refused:
        submit(workflow, REQUEST, "olga")
    assert refused.value.reason == reason
    assert refused.value.metadata[id_field] == "req-1"
    assert workflow.steps == ["validate", "candidate", "read_back"]


def test_stale_digests_are_named_in_the_submitted_order_and_nothing_is_committed() -> None:
    workflow = FakeWorkflow(current=Candidate({"b": DIGEST_B, "a": DIGEST_B}))
    request = Request("req-1", "content-1", {"b": DIGEST_A, "a": DIGEST_A})
    with pytest.raises(FailedPrecondition) as refused:
        submit(workflow, request, "olga")
    assert refused.value.reason == "CANDIDATE_DIGEST_STALE"
    assert refused.value.metadata == {"stale": "b,a"}
    assert "commit" not in workflow.steps


def test_a_held_candidate_is_refused_with_its_holds_and_nothing_is_committed() -> None:
    hold = HoldView("POLICY_DISABLED", "POLICY", "", "policy is disabled")
    handoff = common_pb2.HandoffPayload(
        permitted_next_actions=[common_pb2.PermittedAction(action="update_policy")]
    )
    workflow = FakeWorkflow(
        current=Candidate(
            {"candidate_digest": DIGEST_A}, eligible=False, holds=(hold,), handoff=handoff
        )
    )
    with pytest.raises(FailedPrecondition) as refused:
        submit(workflow, REQUEST, "olga")
    assert refused.value.reason == "CANDIDATE_HELD"
    assert refused.value.metadata == {"holds": "POLICY_DISABLED", "requirements": "POLICY"}
    # The refusal carries the candidate's handoff (a status detail beside its violations).
    assert refused.value.detail(common_pb2.HandoffPayload) == handoff
    assert "commit" not in workflow.steps


def test_a_refusal_after_an_identical_commit_meanwhile_returns_the_stored_result() -> None:
    workflow = FakeWorkflow(
        stored=[stored()],
        commit_refusal=Aborted("JOURNAL_HEAD_STALE", "the head moved"),
    )
    assert submit(workflow, REQUEST, "olga") == Submitted("stored result", created=False)
    assert workflow.steps == ["validate", "candidate", "commit", "read_back"]


def test_a_refusal_with_nothing_stored_meanwhile_is_the_answer() -> None:
    refusal = Aborted("JOURNAL_HEAD_STALE", "the head moved")
    workflow = FakeWorkflow(commit_refusal=refusal)
    with pytest.raises(Aborted) as refused:
        submit(workflow, REQUEST, "olga")
    assert refused.value is refusal
    assert workflow.steps[-1] == "read_back"


def test_a_refusal_after_another_identity_committed_meanwhile_is_a_conflict() -> None:
    workflow = FakeWorkflow(
        current=Candidate({"candidate_digest": DIGEST_B}), stored=[stored("otto")]
    )
    with pytest.raises(Conflict) as refused:
        submit(workflow, REQUEST, "olga")
    assert refused.value.reason == "REQUEST_ID_OWNED_BY_ANOTHER_IDENTITY"
