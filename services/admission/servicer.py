"""gRPC servicer of the admission service: translates protobuf ↔ domain, nothing else."""

from __future__ import annotations

import grpc

from forge.continuity.v1 import admission_pb2, admission_pb2_grpc, ledger_pb2, ledger_pb2_grpc
from shared.auth import ANY_ROLE, Role
from shared.client import call
from shared.errors import Unimplemented
from shared.server import ServiceBinding


def _not_yet(method: str) -> Unimplemented:
    return Unimplemented(
        "NOT_YET_AVAILABLE",
        f"{method} is part of the v1 contract but not available in this release",
        metadata={"method": method},
    )


class AdmissionServicer(admission_pb2_grpc.AdmissionServiceServicer):
    def __init__(self, ledger: ledger_pb2_grpc.LedgerServiceStub) -> None:
        self._ledger = ledger

    def RequestInvalidReadContinuity(
        self,
        request: admission_pb2.RequestInvalidReadContinuityRequest,
        context: grpc.ServicerContext,
    ) -> admission_pb2.RequestInvalidReadContinuityResponse:
        raise _not_yet("RequestInvalidReadContinuity")

    def RequestInvalidReadContinuityV2(
        self,
        request: admission_pb2.RequestInvalidReadContinuityV2Request,
        context: grpc.ServicerContext,
    ) -> admission_pb2.RequestInvalidReadContinuityV2Response:
        raise _not_yet("RequestInvalidReadContinuityV2")

    def GetInvalidReadContinuity(
        self, request: admission_pb2.GetInvalidReadContinuityRequest, context: grpc.ServicerContext
    ) -> admission_pb2.GetInvalidReadContinuityResponse:
        saved = call(
            self._ledger.GetAdmission,
            ledger_pb2.GetAdmissionRequest(run_id=request.run_id, request_id=request.request_id),
        )
        return admission_pb2.GetInvalidReadContinuityResponse(ticket=saved.ticket)

    def RequestInvalidReadRecovery(
        self,
        request: admission_pb2.RequestInvalidReadRecoveryRequest,
        context: grpc.ServicerContext,
    ) -> admission_pb2.RequestInvalidReadRecoveryResponse:
        raise _not_yet("RequestInvalidReadRecovery")

    def GetInvalidReadRecovery(
        self, request: admission_pb2.GetInvalidReadRecoveryRequest, context: grpc.ServicerContext
    ) -> admission_pb2.GetInvalidReadRecoveryResponse:
        raise _not_yet("GetInvalidReadRecovery")

    def RequestRejectedBoundaryRecovery(
        self,
        request: admission_pb2.RequestRejectedBoundaryRecoveryRequest,
        context: grpc.ServicerContext,
    ) -> admission_pb2.RequestRejectedBoundaryRecoveryResponse:
        raise _not_yet("RequestRejectedBoundaryRecovery")

    def GetRejectedBoundaryRecovery(
        self,
        request: admission_pb2.GetRejectedBoundaryRecoveryRequest,
        context: grpc.ServicerContext,
    ) -> admission_pb2.GetRejectedBoundaryRecoveryResponse:
        raise _not_yet("GetRejectedBoundaryRecovery")

    def RequestReadonlyObservationRecovery(
        self,
        request: admission_pb2.RequestReadonlyObservationRecoveryRequest,
        context: grpc.ServicerContext,
    ) -> admission_pb2.RequestReadonlyObservationRecoveryResponse:
        raise _not_yet("RequestReadonlyObservationRecovery")

    def GetReadonlyObservationRecovery(
        self,
        request: admission_pb2.GetReadonlyObservationRecoveryRequest,
        context: grpc.ServicerContext,
    ) -> admission_pb2.GetReadonlyObservationRecoveryResponse:
        raise _not_yet("GetReadonlyObservationRecovery")


OPERATORS = frozenset({Role.EXECUTION_OPERATOR})
ADMINS = frozenset({Role.FACTORY_ADMINISTRATOR})


def bindings(ledger: ledger_pb2_grpc.LedgerServiceStub) -> list[ServiceBinding]:
    servicer = AdmissionServicer(ledger)
    return [
        ServiceBinding(
            admission_pb2.DESCRIPTOR.services_by_name["AdmissionService"],
            lambda server: admission_pb2_grpc.add_AdmissionServiceServicer_to_server(
                servicer, server
            ),
            {
                "RequestInvalidReadContinuity": OPERATORS,
                "RequestInvalidReadContinuityV2": OPERATORS,
                "GetInvalidReadContinuity": ANY_ROLE,
                "RequestInvalidReadRecovery": ADMINS,
                "GetInvalidReadRecovery": ANY_ROLE,
                "RequestRejectedBoundaryRecovery": ADMINS,
                "GetRejectedBoundaryRecovery": ANY_ROLE,
                "RequestReadonlyObservationRecovery": ADMINS,
                "GetReadonlyObservationRecovery": ANY_ROLE,
            },
        )
    ]
