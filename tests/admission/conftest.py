"""The four services, real and in-process on loopback, over one ledger database."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

from forge.continuity.v1 import (
    admission_pb2,
    admission_pb2_grpc,
    candidate_pb2,
    candidate_pb2_grpc,
    common_pb2,
    ledger_pb2_grpc,
    policy_pb2,
    policy_pb2_grpc,
)
from services.admission.servicer import bindings as admission_bindings
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings as candidate_bindings
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.contract.channels import open_channel
from tests.support import Served, admission_downstream, serve


@dataclass
class Stack:
    ledger: Served
    candidate: Served
    admission: Served

    def ledger_stub(self, token: str = "writer-token") -> ledger_pb2_grpc.LedgerServiceStub:
        return ledger_pb2_grpc.LedgerServiceStub(self.ledger.channel(token))

    def candidates(self, token: str = "operator-token") -> candidate_pb2_grpc.CandidateServiceStub:
        return candidate_pb2_grpc.CandidateServiceStub(self.candidate.channel(token))

    def admissions(self, token: str = "operator-token") -> admission_pb2_grpc.AdmissionServiceStub:
        return admission_pb2_grpc.AdmissionServiceStub(self.admission.channel(token))

    def candidate_of(self, run_id: str) -> candidate_pb2.InvalidReadContinuityCandidate:
        return (
            self.candidates()
            .GetInvalidReadContinuityCandidate(
                candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_id)
            )
            .candidate
        )

    def set_policy(self, **settings: object) -> common_pb2.Policy:
        policy = policy_pb2_grpc.PolicyServiceStub(self.ledger.channel("admin-token"))
        current = policy.GetPolicy(policy_pb2.GetPolicyRequest()).policy
        values: dict[str, object] = {"enabled": True, "window_seconds": 3600}
        values.update(settings)
        return policy.PutPolicy(
            policy_pb2.PutPolicyRequest(
                expected_revision=current.revision,
                settings=common_pb2.PolicySettings(**values),  # type: ignore[arg-type]
            )
        ).policy


def submission(
    candidate: candidate_pb2.InvalidReadContinuityCandidate,
    request_id: str = "req-1",
    **overrides: object,
) -> admission_pb2.RequestInvalidReadContinuityRequest:
    fields: dict[str, object] = {
        "run_id": candidate.run_id,
        "request_id": request_id,
        "digests": candidate.digests,
        "version": 1,
        "valid_for_seconds": 1800,
        "acknowledge_no_new_grant": True,
        "acknowledge_original_consumption": True,
        "acknowledge_renewed_same_attempt_lease": True,
    }
    fields.update(overrides)
    return admission_pb2.RequestInvalidReadContinuityRequest(**fields)  # type: ignore[arg-type]


@pytest.fixture
def stack(ledger: Ledger) -> Iterator[Stack]:
    with (
        serve(
            "ledger", ledger_bindings(ledger), max_message_bytes=32 * 1024 * 1024
        ) as ledger_served,
        serve("reconstruction", reconstruction_bindings()) as reconstruction,
    ):
        sources = GrpcCandidateSources(
            open_channel(ledger_served.target, "service-token"),
            open_channel(reconstruction.target, "candidate-service-token"),
        )
        with serve("candidate", candidate_bindings(sources)) as candidate:
            downstream = admission_downstream(ledger_served.target, candidate.target)
            with serve("admission", admission_bindings(downstream)) as admission:
                yield Stack(ledger_served, candidate, admission)


def rpc_reason(error: grpc.RpcError) -> str:
    from shared.runtime.errors import from_rpc_error

    return from_rpc_error(error).reason
