"""gRPC servicer of the admission service: translates protobuf ↔ domain, nothing else."""

from __future__ import annotations

import grpc

from forge.continuity.v1 import admission_pb2, admission_pb2_grpc, common_pb2, ledger_pb2
from services.admission.coordinator import AdmissionCoordinator, Downstream
from services.admission.domain import (
    DIGEST_NAMES,
    V1_ACKNOWLEDGEMENTS,
    V2_ACKNOWLEDGEMENTS,
    ContinuityRequest,
)
from shared.auth import ANY_ROLE, Role, current_principal
from shared.errors import Unimplemented
from shared.server import ServiceBinding


def _not_yet(method: str) -> Unimplemented:
    return Unimplemented(
        "NOT_YET_AVAILABLE",
        f"{method} is part of the v1 contract but not available in this release",
        metadata={"method": method},
    )


def _digests(message: common_pb2.ContinuityDigests) -> dict[str, str]:
    return {name: getattr(message, name) for name in DIGEST_NAMES}


class AdmissionServicer(admission_pb2_grpc.AdmissionServiceServicer):
    def __init__(self, coordinator: AdmissionCoordinator) -> None:
        self._coordinator = coordinator

    def _submit(
        self,
        request: (
            admission_pb2.RequestInvalidReadContinuityRequest
            | admission_pb2.RequestInvalidReadContinuityV2Request
        ),
        expected_version: int,
        acknowledgements: tuple[str, ...],
    ) -> tuple[ledger_pb2.AdmissionTicket, bool]:
        """Both versions' routes: the same request shape, their own version and acknowledgements."""
        return self._coordinator.submit(
            ContinuityRequest(
                run_id=request.run_id,
                request_id=request.request_id,
                version=request.version,
                expected_version=expected_version,
                valid_for_seconds=request.valid_for_seconds,
                digests=_digests(request.digests),
                acknowledgements={name: getattr(request, name) for name in acknowledgements},
            ),
            current_principal().identity,
        )

    def RequestInvalidReadContinuity(
        self,
        request: admission_pb2.RequestInvalidReadContinuityRequest,
        context: grpc.ServicerContext,
    ) -> admission_pb2.RequestInvalidReadContinuityResponse:
        ticket, created = self._submit(request, 1, V1_ACKNOWLEDGEMENTS)
        return admission_pb2.RequestInvalidReadContinuityResponse(ticket=ticket, created=created)

    def RequestInvalidReadContinuityV2(
        self,
        request: admission_pb2.RequestInvalidReadContinuityV2Request,
        context: grpc.ServicerContext,
    ) -> admission_pb2.RequestInvalidReadContinuityV2Response:
        ticket, created = self._submit(request, 2, V2_ACKNOWLEDGEMENTS)
        return admission_pb2.RequestInvalidReadContinuityV2Response(ticket=ticket, created=created)

    def GetInvalidReadContinuity(
        self, request: admission_pb2.GetInvalidReadContinuityRequest, context: grpc.ServicerContext
    ) -> admission_pb2.GetInvalidReadContinuityResponse:
        ticket = self._coordinator.read_back(request.run_id, request.request_id)
        return admission_pb2.GetInvalidReadContinuityResponse(ticket=ticket)

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


def bindings(downstream: Downstream) -> list[ServiceBinding]:
    servicer = AdmissionServicer(AdmissionCoordinator(downstream))
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
