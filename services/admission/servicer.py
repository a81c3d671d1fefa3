"""The admission service as a dispatch table: RPC name → route.

A route holds the roles allowed to call the RPC and its answer: translate the protobuf request to
the domain, run it (a submit through the driver, or a read), and
build the protobuf response. Nothing else happens here; the table is also what is registered with
the server, so an RPC without a route cannot be served. GetCallerPermissions reports the roles of
this very table (and of the candidate service's table) to the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar

import grpc
from google.protobuf.message import Message

from forge.continuity.v1 import admission_pb2, common_pb2, ledger_pb2
from services.admission.downstream import Downstream
from services.admission.driver import Submission, Submitted, Workflow, submit
from services.admission.workflows.invalid_read import (
    AdmissionKey,
    ContinuityRequest,
    InvalidReadContinuity,
)
from services.admission.workflows.never_claimed import (
    NeverClaimedRecovery,
    NeverClaimedRequest,
    RecoveryKey,
)
from services.admission.workflows.readonly_observation import (
    ReadonlyObservationRecovery,
    ReadonlyObservationRequest,
)
from services.admission.workflows.rejected_boundary import (
    RejectedBoundaryRecovery,
    RejectedBoundaryRequest,
)
from services.candidate.roles import METHOD_ROLES as CANDIDATE_ROLES
from services.candidate.roles import SERVICE as CANDIDATE_SERVICE
from shared.continuity.readonly_observation import READONLY_OBSERVATION
from shared.continuity.rejected_boundary import REJECTED_BOUNDARY
from shared.contract.rejected_boundary_proto import corrective_provider, reviewed_rejection
from shared.contract.terms import DIGEST_NAMES, RECOVERY_ACKNOWLEDGEMENTS, VERSIONS
from shared.runtime.auth import ANY_ROLE, Principal, Role, current_principal, decisions
from shared.runtime.server import ServiceBinding, service_binding

SERVICE = admission_pb2.DESCRIPTOR.services_by_name["AdmissionService"]
OPERATORS = frozenset({Role.EXECUTION_OPERATOR})
ADMINS = frozenset({Role.FACTORY_ADMINISTRATOR})

ProtoT = TypeVar("ProtoT", bound=Message)
RequestT = TypeVar("RequestT", bound=Submission)
ResultT = TypeVar("ResultT")
KeyT = TypeVar("KeyT")


@dataclass(frozen=True)
class Call:
    """The RPC being answered and its authenticated caller."""

    method: str
    principal: Principal

    @property
    def identity(self) -> str:
        return self.principal.identity


@dataclass(frozen=True)
class Route:
    """Who may call an RPC and how it is answered (protobuf request → protobuf response)."""

    roles: frozenset[Role]
    answer: Callable[[Any, Call], Message]


def submit_route(
    roles: frozenset[Role],
    workflow: Workflow[RequestT, Any, ResultT],
    translate: Callable[[ProtoT], RequestT],
    respond: Callable[[Submitted[ResultT]], Message],
) -> Route:
    """A submission run through the submit driver by ``workflow``."""

    def answer(request: ProtoT, call: Call) -> Message:
        return respond(submit(workflow, translate(request), call.identity))

    return Route(roles, answer)


def read_route(
    roles: frozenset[Role],
    read: Callable[[KeyT], ResultT],
    translate: Callable[[ProtoT], KeyT],
    respond: Callable[[ResultT], Message],
) -> Route:
    """A read of a stored result by its key."""

    def answer(request: ProtoT, call: Call) -> Message:
        return respond(read(translate(request)))

    return Route(roles, answer)


def caller_permissions_route(table: Mapping[str, Route]) -> Route:
    """The caller's identity, roles and the decision for every admission and candidate RPC.

    ``table`` is the route table being served (this route included once it is added): the roles
    reported are the ones :func:`binding` hands to the server's authorization, not a copy.
    """

    def answer(request: admission_pb2.GetCallerPermissionsRequest, call: Call) -> Message:
        method_roles = {
            **{f"/{SERVICE.full_name}/{name}": route.roles for name, route in table.items()},
            **{f"/{CANDIDATE_SERVICE.full_name}/{name}": r for name, r in CANDIDATE_ROLES.items()},
        }
        return admission_pb2.GetCallerPermissionsResponse(
            identity=call.principal.identity,
            roles=_role_numbers(call.principal.roles),
            permissions=[
                admission_pb2.MethodPermission(
                    method=decision.method,
                    permitted=decision.permitted,
                    required_roles=_role_numbers(decision.required_roles),
                )
                for decision in decisions(call.principal, method_roles)
            ],
        )

    return Route(ANY_ROLE, answer)


def _role_numbers(roles: frozenset[Role]) -> list[common_pb2.Role.ValueType]:
    return sorted(common_pb2.Role.Value(f"ROLE_{role.name}") for role in roles)


# --- translators and builders -----------------------------------------------------------------


def _continuity_request(version: int) -> Callable[[Any], ContinuityRequest]:
    """Both versions' routes share the request shape; each reads its own acknowledgements."""
    acknowledgements = VERSIONS[version].acknowledgements

    def translate(
        request: (
            admission_pb2.RequestInvalidReadContinuityRequest
            | admission_pb2.RequestInvalidReadContinuityV2Request
        ),
    ) -> ContinuityRequest:
        return ContinuityRequest(
            run_id=request.run_id,
            request_id=request.request_id,
            version=request.version,
            valid_for_seconds=request.valid_for_seconds,
            digests={name: getattr(request.digests, name) for name in DIGEST_NAMES},
            acknowledgements={name: getattr(request, name) for name in acknowledgements},
        )

    return translate


def _admission_key(request: admission_pb2.GetInvalidReadContinuityRequest) -> AdmissionKey:
    return AdmissionKey(request.run_id, request.request_id)


def _v1_response(
    submitted: Submitted[ledger_pb2.AdmissionTicket],
) -> admission_pb2.RequestInvalidReadContinuityResponse:
    return admission_pb2.RequestInvalidReadContinuityResponse(
        ticket=submitted.result, created=submitted.created
    )


def _v2_response(
    submitted: Submitted[ledger_pb2.AdmissionTicket],
) -> admission_pb2.RequestInvalidReadContinuityV2Response:
    return admission_pb2.RequestInvalidReadContinuityV2Response(
        ticket=submitted.result, created=submitted.created
    )


def _ticket_response(
    ticket: ledger_pb2.AdmissionTicket,
) -> admission_pb2.GetInvalidReadContinuityResponse:
    return admission_pb2.GetInvalidReadContinuityResponse(ticket=ticket)


#: The three recovery submission messages; they share the fields ``_recovery_fields`` reads.
_RecoverySubmission = (
    admission_pb2.RequestInvalidReadRecoveryRequest
    | admission_pb2.RequestRejectedBoundaryRecoveryRequest
    | admission_pb2.RequestReadonlyObservationRecoveryRequest
)


class _RecoveryFields(TypedDict):
    run_id: str
    request_id: str
    recovery_id: str
    candidate_digest: str
    valid_for_seconds: int
    acknowledgements: Mapping[str, bool]


def _recovery_fields(request: _RecoverySubmission, workflow: str) -> _RecoveryFields:
    """The fields every recovery submission carries, with its workflow's acknowledgements."""
    return {
        "run_id": request.run_id,
        "request_id": request.request_id,
        "recovery_id": request.recovery_id,
        "candidate_digest": request.candidate_digest,
        "valid_for_seconds": request.valid_for_seconds,
        "acknowledgements": {
            name: getattr(request, name) for name in RECOVERY_ACKNOWLEDGEMENTS[workflow]
        },
    }


def _never_claimed_request(
    request: admission_pb2.RequestInvalidReadRecoveryRequest,
) -> NeverClaimedRequest:
    return NeverClaimedRequest(**_recovery_fields(request, "never_claimed"))


def _never_claimed_key(request: admission_pb2.GetInvalidReadRecoveryRequest) -> RecoveryKey:
    return RecoveryKey(request.run_id, request.request_id)


def _never_claimed_response(
    submitted: Submitted[admission_pb2.RecoveryOutcome],
) -> admission_pb2.RequestInvalidReadRecoveryResponse:
    return admission_pb2.RequestInvalidReadRecoveryResponse(
        outcome=submitted.result, created=submitted.created
    )


def _rejected_boundary_request(
    request: admission_pb2.RequestRejectedBoundaryRecoveryRequest,
) -> RejectedBoundaryRequest:
    return RejectedBoundaryRequest(
        review=reviewed_rejection(request.reviewed_rejection),
        corrective=corrective_provider(request.corrective_provider),
        **_recovery_fields(request, REJECTED_BOUNDARY),
    )


def _rejected_boundary_key(
    request: admission_pb2.GetRejectedBoundaryRecoveryRequest,
) -> RecoveryKey:
    return RecoveryKey(request.run_id, request.request_id, REJECTED_BOUNDARY)


def _rejected_boundary_response(
    submitted: Submitted[admission_pb2.RecoveryOutcome],
) -> admission_pb2.RequestRejectedBoundaryRecoveryResponse:
    return admission_pb2.RequestRejectedBoundaryRecoveryResponse(
        outcome=submitted.result, created=submitted.created
    )


def _rejected_boundary_read(
    outcome: admission_pb2.RecoveryOutcome,
) -> admission_pb2.GetRejectedBoundaryRecoveryResponse:
    return admission_pb2.GetRejectedBoundaryRecoveryResponse(outcome=outcome)


def _readonly_observation_request(
    request: admission_pb2.RequestReadonlyObservationRecoveryRequest,
) -> ReadonlyObservationRequest:
    return ReadonlyObservationRequest(**_recovery_fields(request, READONLY_OBSERVATION))


def _readonly_observation_key(
    request: admission_pb2.GetReadonlyObservationRecoveryRequest,
) -> RecoveryKey:
    return RecoveryKey(request.run_id, request.request_id, READONLY_OBSERVATION)


def _readonly_observation_response(
    submitted: Submitted[admission_pb2.RecoveryOutcome],
) -> admission_pb2.RequestReadonlyObservationRecoveryResponse:
    return admission_pb2.RequestReadonlyObservationRecoveryResponse(
        outcome=submitted.result, created=submitted.created
    )


def _readonly_observation_read(
    outcome: admission_pb2.RecoveryOutcome,
) -> admission_pb2.GetReadonlyObservationRecoveryResponse:
    return admission_pb2.GetReadonlyObservationRecoveryResponse(outcome=outcome)


def _recovery_response(
    outcome: admission_pb2.RecoveryOutcome,
) -> admission_pb2.GetInvalidReadRecoveryResponse:
    return admission_pb2.GetInvalidReadRecoveryResponse(outcome=outcome)


# --- the table --------------------------------------------------------------------------------


def routes(downstream: Downstream) -> dict[str, Route]:
    """Every RPC of AdmissionService, by name."""

    def saved_ticket(key: AdmissionKey) -> ledger_pb2.AdmissionTicket:
        # The ledger's ADMISSION_NOT_FOUND is the read's answer for an unknown key.
        return downstream.stored_ticket(key).result

    def saved_recovery(key: RecoveryKey) -> admission_pb2.RecoveryOutcome:
        # The ledger's RECOVERY_NOT_FOUND is the read's answer for an unknown key.
        return downstream.stored_recovery(key).result

    table: dict[str, Route] = {
        "RequestInvalidReadContinuity": submit_route(
            OPERATORS,
            InvalidReadContinuity(VERSIONS[1], downstream),
            _continuity_request(1),
            _v1_response,
        ),
        "RequestInvalidReadContinuityV2": submit_route(
            OPERATORS,
            InvalidReadContinuity(VERSIONS[2], downstream),
            _continuity_request(2),
            _v2_response,
        ),
        "GetInvalidReadContinuity": read_route(
            ANY_ROLE, saved_ticket, _admission_key, _ticket_response
        ),
        "RequestInvalidReadRecovery": submit_route(
            ADMINS,
            NeverClaimedRecovery(downstream),
            _never_claimed_request,
            _never_claimed_response,
        ),
        "GetInvalidReadRecovery": read_route(
            ANY_ROLE, saved_recovery, _never_claimed_key, _recovery_response
        ),
        "RequestRejectedBoundaryRecovery": submit_route(
            ADMINS,
            RejectedBoundaryRecovery(downstream),
            _rejected_boundary_request,
            _rejected_boundary_response,
        ),
        "GetRejectedBoundaryRecovery": read_route(
            ANY_ROLE, saved_recovery, _rejected_boundary_key, _rejected_boundary_read
        ),
        "RequestReadonlyObservationRecovery": submit_route(
            ADMINS,
            ReadonlyObservationRecovery(downstream),
            _readonly_observation_request,
            _readonly_observation_response,
        ),
        "GetReadonlyObservationRecovery": read_route(
            ANY_ROLE, saved_recovery, _readonly_observation_key, _readonly_observation_read
        ),
    }
    # Reads the finished table at call time, so it reports every route, itself included.
    table["GetCallerPermissions"] = caller_permissions_route(table)
    return table


def _behaviour(name: str, route: Route) -> Callable[[Message, grpc.ServicerContext], Message]:
    def behaviour(request: Message, context: grpc.ServicerContext) -> Message:
        return route.answer(request, Call(name, current_principal()))

    return behaviour


def binding(table: Mapping[str, Route]) -> ServiceBinding:
    """Serve ``table``; it must route exactly the service's RPCs (fail closed)."""
    return service_binding(
        SERVICE,
        {name: route.roles for name, route in table.items()},
        lambda name: _behaviour(name, table[name]),
    )


def bindings(downstream: Downstream) -> list[ServiceBinding]:
    return [binding(routes(downstream))]
