"""The recovery half of one pass of proof: a recovery candidate reads each of its inputs once,
from one snapshot, and admission commits the derived checkpoint the candidate computed only when
its bytes hash to the candidate's proof, without reconstructing again."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from services.admission.driver import Submitted
from services.admission.workflows.recovery import (
    RecoveryCandidateView,
    RecoveryCommit,
    RecoveryKey,
    RecoveryRequest,
    RecoverySubmission,
)
from services.candidate.domain.recovery import Caller, recovery_candidate
from services.candidate.downstream import GrpcCandidateSources
from services.demo.provider import RefusingProvider
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.continuity.canonical import sha256_digest
from shared.continuity.recovery import WORKFLOWS, DerivedCheckpoint, Inputs, Workflow
from shared.contract.channels import open_channel
from shared.runtime.errors import FailedPrecondition, NotFound
from tests.admission.conftest import Stack
from tests.recovery.test_rejected_boundary import admit_enabled, refused_at_provider, review
from tests.support import serve


class Counting:
    """Candidate sources that count every read they forward."""

    def __init__(self, sources: GrpcCandidateSources) -> None:
        self._sources = sources
        self.calls: Counter[str] = Counter()
        self.blobs: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._sources, name)
        if not callable(found):
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if name == "blob":
                self.blobs[args[0]] += 1
            return found(*args, **kwargs)

        return counted


def test_the_rejected_boundary_candidate_reads_each_input_once_from_one_snapshot(
    stack: Stack, provider: RefusingProvider
) -> None:
    ticket = admit_enabled(stack)
    sent = refused_at_provider(stack, ticket, provider)
    reviewed = review(stack, sent)
    with serve("reconstruction", reconstruction_bindings()) as reconstruction:
        sources = Counting(
            GrpcCandidateSources(
                open_channel(stack.ledger.target, "service-token"),
                open_channel(reconstruction.target, "candidate-service-token"),
            )
        )
        candidate = recovery_candidate(
            "rejected_boundary",
            sources,  # type: ignore[arg-type]
            "run-1",
            "req-1",
            Caller("admission", frozenset({"admission_service"}), recomputing=True),
            Inputs(reviewed=reviewed),
        )
    assert candidate.eligible, candidate.holds
    # policy and execution requests come from the snapshot's header, not a second read
    assert sources.calls["policy"] == sources.calls["execution_requests"] == 0
    assert sources.calls["snapshot"] == 1
    # the derived checkpoint is read once for the intact check and the reproduction
    derived = ticket.execution_request.checkpoint_digest
    assert sources.blobs[derived] == 1
    assert sources.calls["reproduce_pending"] == 1


class Port:
    """Admission's recovery port with a candidate that carries its commit inputs; it offers no
    blob read and no reconstruction, so none can happen."""

    def __init__(self, view: RecoveryCandidateView) -> None:
        self.view = view
        self.commits: list[RecoveryCommit] = []

    def stored_recovery(self, key: RecoveryKey) -> Any:
        raise NotFound("RECOVERY_NOT_FOUND", "none")

    def recovery_candidate(
        self, workflow: Workflow, run_id: str, request_id: str, inputs: Inputs
    ) -> RecoveryCandidateView:
        return self.view

    def commit_recovery(self, recovery: RecoveryCommit) -> Submitted[str]:
        self.commits.append(recovery)
        return Submitted("saved", True)


CHECKPOINT = b'{"derived": true}'


def _view(content: bytes, proven: str) -> RecoveryCandidateView:
    return RecoveryCandidateView(
        eligible=True,
        candidate_digest="sha256:" + "a" * 64,
        holds=(),
        policy_revision=2,
        journal_head_hash="sha256:" + "b" * 64,
        proven_checkpoint_digest=proven,
        commit_inputs=DerivedCheckpoint(content, sha256_digest(CHECKPOINT), "sha256:" + "c" * 64),
    )


def _request(workflow: Workflow) -> RecoveryRequest:
    return RecoveryRequest(
        workflow=workflow.name,
        run_id="run-1",
        request_id="req-1",
        recovery_id="obs-1",
        candidate_digest="sha256:" + "a" * 64,
        valid_for_seconds=600,
        acknowledgements=dict.fromkeys(workflow.acknowledgements, True),
    )


def test_admission_commits_the_candidates_checkpoint_without_reconstructing() -> None:
    workflow = WORKFLOWS["readonly_observation"]
    port = Port(_view(CHECKPOINT, sha256_digest(CHECKPOINT)))
    submission = RecoverySubmission(workflow, port)
    request = _request(workflow)
    assert submission.commit(request, "ada", port.view).created
    (commit,) = port.commits
    assert commit.inputs.derived == port.view.commit_inputs


@pytest.mark.parametrize(
    "content, proven",
    [
        (b"altered bytes", sha256_digest(CHECKPOINT)),  # bytes that do not hash to the digest
        (CHECKPOINT, "sha256:" + "d" * 64),  # a digest that is not the proof's
    ],
)
def test_bytes_that_are_not_the_candidates_proof_are_refused(content: bytes, proven: str) -> None:
    workflow = WORKFLOWS["readonly_observation"]
    port = Port(_view(content, proven))
    with pytest.raises(FailedPrecondition) as refused:
        RecoverySubmission(workflow, port).commit(_request(workflow), "ada", port.view)
    assert refused.value.reason == "RECONSTRUCTION_MISMATCH"
    assert port.commits == []
