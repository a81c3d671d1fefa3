"""Admission reuses the candidate's reconstruction inputs and result, only for exactly those
inputs: the candidate returns them on request (eligible candidates only, digests matching the
proof), and admission's port answers its rebuild from them without another hop, falling back to
the ledger and reconstruction for anything else."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from forge.continuity.v1 import candidate_pb2, ledger_pb2, reconstruction_pb2
from services.admission.downstream import Downstream
from services.admission.driver import submit
from services.admission.workflows.invalid_read import ContinuityRequest, InvalidReadContinuity
from services.demo.seed import load_fixture, seed_held_run
from shared.continuity.canonical import canonical_text, sha256_digest
from shared.contract.terms import DIGEST_NAMES, VERSIONS
from tests.admission.conftest import Stack

FIXTURE = load_fixture("v1_basic")


def read(
    stack: Stack, run_id: str, include: bool
) -> candidate_pb2.GetInvalidReadContinuityCandidateResponse:
    return stack.candidates("service-token").GetInvalidReadContinuityCandidate(
        candidate_pb2.GetInvalidReadContinuityCandidateRequest(
            run_id=run_id, include_admission_inputs=include
        )
    )


def test_an_eligible_candidate_returns_the_inputs_its_proof_names(stack: Stack) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    response = read(stack, "run-1", include=True)
    proof, inputs = response.candidate.proof, response.admission_inputs
    assert response.candidate.eligible and response.HasField("admission_inputs")
    assert sha256_digest(inputs.checkpoint) == proof.checkpoint_digest
    assert sha256_digest(inputs.raw_response) == proof.consumed_response_digest
    assert inputs.consume_sequence == proof.consume_sequence
    assert sha256_digest(inputs.derived_checkpoint) == proof.derived_checkpoint_digest
    assert inputs.derived_checkpoint_digest == proof.derived_checkpoint_digest
    assert inputs.witness_digest == proof.witness_digest
    assert inputs.reconstruction_version == VERSIONS[1].reconstruction_version
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


# --- admission's port over recording stubs ------------------------------------------------------

CHECKPOINT, RESPONSE, DERIVED = b'{"checkpoint":1}', b'{"response":1}', b'{"derived":1}'
CONSUMED_AT = "2026-10-20T10:01:00.000000Z"
CONSUME = canonical_text({"request_id": "r", "consumed_at": CONSUMED_AT})


@dataclass
class Recorder:
    """Stands in for the ledger, candidate and reconstruction stubs; counts every call."""

    inputs: candidate_pb2.InvalidReadAdmissionInputs | None
    calls: Counter[str] = field(default_factory=Counter)
    committed: list[ledger_pb2.CommitAdmissionRequest] = field(default_factory=list)

    def GetAdmission(self, request: Any) -> Any:
        from shared.runtime.errors import NotFound

        raise NotFound("ADMISSION_NOT_FOUND", "none")

    def GetInvalidReadContinuityCandidate(self, request: Any) -> Any:
        self.calls["candidate"] += 1
        assert request.include_admission_inputs
        candidate = candidate_pb2.InvalidReadContinuityCandidate(
            run_id="run-1", eligible=True, version=1
        )
        candidate.proof.checkpoint_digest = sha256_digest(CHECKPOINT)
        candidate.proof.consumed_response_digest = sha256_digest(RESPONSE)
        candidate.proof.consume_sequence = 4
        candidate.proof.derived_checkpoint_digest = sha256_digest(DERIVED)
        for name in DIGEST_NAMES:
            setattr(candidate.digests, name, "sha256:" + "a" * 64)
        return candidate_pb2.GetInvalidReadContinuityCandidateResponse(
            candidate=candidate, admission_inputs=self.inputs
        )

    def GetBlob(self, request: Any) -> Any:
        self.calls["GetBlob"] += 1
        content = {sha256_digest(CHECKPOINT): CHECKPOINT, sha256_digest(RESPONSE): RESPONSE}
        return ledger_pb2.GetBlobResponse(content=content[request.digest])

    def ReadJournal(self, request: Any) -> Any:
        self.calls["ReadJournal"] += 1
        entry = ledger_pb2.ReadJournalResponse().entries.add()
        entry.payload_json = CONSUME
        response = ledger_pb2.ReadJournalResponse()
        response.entries.append(entry)
        return response

    def ReconstructInvalidRead(self, request: Any) -> Any:
        self.calls["reconstruct"] += 1
        return reconstruction_pb2.ReconstructInvalidReadResponse(
            derived_checkpoint=DERIVED,
            derived_checkpoint_digest=sha256_digest(DERIVED),
            witness_digest="sha256:" + "f" * 64,
        )

    def CommitAdmission(self, request: Any) -> Any:
        self.committed.append(request)
        return ledger_pb2.CommitAdmissionResponse(created=True)


def inputs(**overrides: Any) -> candidate_pb2.InvalidReadAdmissionInputs:
    values: dict[str, Any] = {
        "checkpoint": CHECKPOINT,
        "raw_response": RESPONSE,
        "consume_sequence": 4,
        "consume_payload_json": CONSUME,
        "reconstruction_version": VERSIONS[1].reconstruction_version,
        "derived_checkpoint": DERIVED,
        "derived_checkpoint_digest": sha256_digest(DERIVED),
        "witness_digest": "sha256:" + "f" * 64,
    }
    values.update(overrides)
    return candidate_pb2.InvalidReadAdmissionInputs(**values)


def admit(recorder: Recorder) -> ledger_pb2.CommitAdmissionRequest:
    port = Downstream(recorder, recorder, recorder)  # type: ignore[arg-type]
    request = ContinuityRequest(
        run_id="run-1",
        request_id="req-1",
        version=1,
        valid_for_seconds=1800,
        digests=dict.fromkeys(DIGEST_NAMES, "sha256:" + "a" * 64),
        acknowledgements=dict.fromkeys(VERSIONS[1].acknowledgements, True),
    )
    submit(InvalidReadContinuity(VERSIONS[1], port), request, "olga")
    [committed] = recorder.committed
    return committed


def test_the_rebuild_reuses_the_candidates_inputs_without_another_hop() -> None:
    recorder = Recorder(inputs())
    committed = admit(recorder)
    assert recorder.calls == Counter({"candidate": 1})
    assert committed.derived_checkpoint == DERIVED
    assert committed.derived_checkpoint_digest == sha256_digest(DERIVED)
    assert committed.witness_digest == "sha256:" + "f" * 64


def test_without_inputs_the_rebuild_reads_and_reconstructs_as_before() -> None:
    recorder = Recorder(None)
    committed = admit(recorder)
    assert recorder.calls == Counter(
        {"candidate": 1, "GetBlob": 2, "ReadJournal": 1, "reconstruct": 1}
    )
    assert committed.derived_checkpoint == DERIVED


def test_inputs_for_other_bytes_or_another_version_are_not_reused() -> None:
    # A reconstruction for another version, and derived bytes that do not match their digest:
    # neither answers the rebuild, reconstruction is asked.
    for changed in (
        inputs(reconstruction_version=VERSIONS[2].reconstruction_version),
        inputs(derived_checkpoint=b'{"derived":2}'),
    ):
        recorder = Recorder(changed)
        assert admit(recorder).derived_checkpoint == DERIVED
        assert recorder.calls["reconstruct"] == 1
