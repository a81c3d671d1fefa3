"""gRPC servicer of the candidate service: translates protobuf ↔ domain, nothing else."""

from __future__ import annotations

import grpc

from forge.continuity.v1 import candidate_pb2, candidate_pb2_grpc
from shared.auth import Role
from shared.errors import Unimplemented
from shared.server import ServiceBinding


def _not_yet(method: str) -> Unimplemented:
    return Unimplemented(
        "NOT_YET_AVAILABLE",
        f"{method} is part of the v1 contract but not available in this release",
        metadata={"method": method},
    )


class CandidateServicer(candidate_pb2_grpc.CandidateServiceServicer):
    def GetInvalidReadContinuityCandidate(
        self,
        request: candidate_pb2.GetInvalidReadContinuityCandidateRequest,
        context: grpc.ServicerContext,
    ) -> candidate_pb2.GetInvalidReadContinuityCandidateResponse:
        raise _not_yet("GetInvalidReadContinuityCandidate")

    def GetInvalidReadRecoveryCandidate(
        self,
        request: candidate_pb2.GetInvalidReadRecoveryCandidateRequest,
        context: grpc.ServicerContext,
    ) -> candidate_pb2.GetInvalidReadRecoveryCandidateResponse:
        raise _not_yet("GetInvalidReadRecoveryCandidate")

    def GetRejectedBoundaryCandidate(
        self,
        request: candidate_pb2.GetRejectedBoundaryCandidateRequest,
        context: grpc.ServicerContext,
    ) -> candidate_pb2.GetRejectedBoundaryCandidateResponse:
        raise _not_yet("GetRejectedBoundaryCandidate")

    def GetReadonlyObservationCandidate(
        self,
        request: candidate_pb2.GetReadonlyObservationCandidateRequest,
        context: grpc.ServicerContext,
    ) -> candidate_pb2.GetReadonlyObservationCandidateResponse:
        raise _not_yet("GetReadonlyObservationCandidate")


OPERATORS = frozenset({Role.EXECUTION_OPERATOR, Role.FACTORY_ADMINISTRATOR})
ADMINS = frozenset({Role.FACTORY_ADMINISTRATOR})


def bindings() -> list[ServiceBinding]:
    servicer = CandidateServicer()
    return [
        ServiceBinding(
            candidate_pb2.DESCRIPTOR.services_by_name["CandidateService"],
            lambda server: candidate_pb2_grpc.add_CandidateServiceServicer_to_server(
                servicer, server
            ),
            {
                "GetInvalidReadContinuityCandidate": OPERATORS,
                "GetInvalidReadRecoveryCandidate": ADMINS,
                "GetRejectedBoundaryCandidate": ADMINS,
                "GetReadonlyObservationCandidate": ADMINS,
            },
        )
    ]
