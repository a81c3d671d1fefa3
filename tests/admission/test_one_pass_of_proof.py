"""One pass of proof per admission: the candidate returns, with an eligible candidate, the derived
checkpoint its one reconstruction produced (the bytes and the two digests its proof binds, nothing
it was reconstructed from), and admission commits exactly that: it reads no blob or journal entry
and asks for no reconstruction again. Bytes that do not match the proof, or none, are refused
before the commit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest

from forge.continuity.v1 import (
    admission_pb2_grpc,
    candidate_pb2,
    candidate_pb2_grpc,
    ledger_pb2,
    ledger_pb2_grpc,
)
from services.admission.downstream import Downstream
from services.admission.driver import submit
from services.admission.servicer import bindings as admission_bindings
from services.admission.workflows.invalid_read import ContinuityRequest, InvalidReadContinuity
from services.demo.seed import load_fixture, seed_held_run
from shared.continuity.canonical import sha256_digest
from shared.contract.channels import open_channel
from shared.contract.terms import DIGEST_NAMES, VERSIONS
from shared.runtime.errors import FailedPrecondition, NotFound
from tests.admission.conftest import Stack, submission
from tests.support import serve

FIXTURE = load_fixture("v1_basic")


def read(
    stack: Stack, run_id: str, include: bool
) -> candidate_pb2.GetInvalidReadContinuityCandidateResponse:
    return stack.candidates("service-token").GetInvalidReadContinuityCandidate(
        candidate_pb2.GetInvalidReadContinuityCandidateRequest(
            run_id=run_id, include_admission_inputs=include
        )
    )


def test_an_eligible_candidate_returns_the_derived_checkpoint_its_proof_names(
    stack: Stack,
) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    response = read(stack, "run-1", include=True)
    proof, inputs = response.candidate.proof, response.admission_inputs
    assert response.candidate.eligible and response.HasField("admission_inputs")
    assert sha256_digest(inputs.derived_checkpoint) == proof.derived_checkpoint_digest
    assert inputs.derived_checkpoint_digest == proof.derived_checkpoint_digest
    assert inputs.witness_digest == proof.witness_digest
    # What the commit stores, and nothing the candidate was reconstructed from.
    assert {described.name for described, _ in inputs.ListFields()} == {
        "derived_checkpoint",
        "derived_checkpoint_digest",
        "witness_digest",
    }
    # Without the request the answer is the candidate alone, and the candidate is the same.
    plain = read(stack, "run-1", include=False)
    assert not plain.HasField("admission_inputs")
    assert plain.candidate == response.candidate


def test_a_held_candidate_returns_no_inputs(stack: Stack) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy(enabled=False)
    response = read(stack, "run-1", include=True)
    assert not response.candidate.eligible
    assert not response.HasField("admission_inputs")


class Calls(grpc.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]
    """Counts each downstream method an admission server calls."""

    def __init__(self) -> None:
        self.methods: Counter[str] = Counter()

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        self.methods[str(details.method).rsplit("/", 1)[-1]] += 1
        return continuation(details, request)


def test_an_admission_commits_the_candidates_derived_checkpoint_without_another_hop(
    stack: Stack,
) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    proved = read(stack, "run-1", include=True).admission_inputs
    calls = Calls()

    def stub(target: str, kind: Any) -> Any:
        return kind(open_channel(target, "service-token", extra_interceptors=[calls]))

    downstream = Downstream(
        ledger=stub(stack.ledger.target, ledger_pb2_grpc.LedgerServiceStub),
        candidate=stub(stack.candidate.target, candidate_pb2_grpc.CandidateServiceStub),
    )
    with serve("admission", admission_bindings(downstream)) as admission:
        ticket = (
            admission_pb2_grpc.AdmissionServiceStub(admission.channel("operator-token"))
            .RequestInvalidReadContinuity(submission(stack.candidate_of("run-1")))
            .ticket
        )
    # No read back before the candidate (ADR 0024): a first admission is two hops.
    assert calls.methods == Counter(GetInvalidReadContinuityCandidate=1, CommitAdmission=1)
    assert ticket.derived_checkpoint_digest == proved.derived_checkpoint_digest
    stored = stack.ledger_stub().GetBlob(
        ledger_pb2.GetBlobRequest(digest=ticket.derived_checkpoint_digest)
    )
    assert stored.content == proved.derived_checkpoint


# --- a candidate that sends other bytes, or none, over admission's real port -----------------

DERIVED, WITNESS = b'{"derived":1}', "sha256:" + "f" * 64


@dataclass
class Candidate:
    """Stands in for the ledger and candidate stubs: one eligible candidate proving ``DERIVED``,
    answered with ``inputs``; records every other call."""

    inputs: candidate_pb2.CommitInputs | None
    calls: Counter[str] = field(default_factory=Counter)

    def GetAdmission(self, request: Any) -> Any:
        raise NotFound("ADMISSION_NOT_FOUND", "none")

    def GetInvalidReadContinuityCandidate(self, request: Any) -> Any:
        self.calls["candidate"] += 1
        assert request.include_admission_inputs
        candidate = candidate_pb2.InvalidReadContinuityCandidate(
            run_id="run-1", eligible=True, version=1
        )
        candidate.proof.derived_checkpoint_digest = sha256_digest(DERIVED)
        candidate.proof.witness_digest = WITNESS
        for name in DIGEST_NAMES:
            setattr(candidate.digests, name, "sha256:" + "a" * 64)
        return candidate_pb2.GetInvalidReadContinuityCandidateResponse(
            candidate=candidate, admission_inputs=self.inputs
        )

    def __getattr__(self, name: str) -> Callable[[Any], Any]:
        def record(request: Any) -> Any:
            self.calls[name] += 1
            raise AssertionError(f"admission called {name}")

        return record


def admit(stand_in: Candidate) -> None:
    port = Downstream(stand_in, stand_in)  # type: ignore[arg-type]
    request = ContinuityRequest(
        run_id="run-1",
        request_id="req-1",
        version=1,
        valid_for_seconds=1800,
        digests=dict.fromkeys(DIGEST_NAMES, "sha256:" + "a" * 64),
        acknowledgements=dict.fromkeys(VERSIONS[1].acknowledgements, True),
    )
    submit(InvalidReadContinuity(VERSIONS[1], port), request, "olga")


def inputs(derived: bytes = DERIVED) -> candidate_pb2.CommitInputs:
    return candidate_pb2.CommitInputs(
        derived_checkpoint=derived,
        derived_checkpoint_digest=sha256_digest(DERIVED),
        witness_digest=WITNESS,
    )


@pytest.mark.parametrize(
    ("sent", "reason"),
    [
        (inputs(b'{"derived":2}'), "RECONSTRUCTION_MISMATCH"),
        (None, "DERIVED_CHECKPOINT_MISSING"),
    ],
)
def test_other_bytes_or_none_are_refused_without_another_hop(
    sent: candidate_pb2.CommitInputs | None, reason: str
) -> None:
    stand_in = Candidate(sent)
    with pytest.raises(FailedPrecondition) as refused:
        admit(stand_in)
    assert refused.value.reason == reason
    # Neither a commit nor a read or reconstruction to make up for it.
    assert stand_in.calls == Counter({"candidate": 1})
