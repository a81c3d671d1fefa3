"""The admission service as a dispatch table: RPC name → route.

A route holds an RPC's answer: translate the protobuf request to the domain, run it (a submit
through the driver, or a read), and build the protobuf response. Nothing else happens here; the
table is also what is registered with the server, so an RPC without a route cannot be served.
Who may call each RPC is the contract's (shared.contract.method_facts), as for every service;
GetCallerPermissions reports those very roles for this service's and the candidate service's
RPCs to the caller; ListRecoveryWorkflows describes the recovery workflows it routes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from forge.continuity.v1 import admission_pb2, common_pb2, ledger_pb2
from services.admission.downstream import Downstream
from services.admission.driver import Submission, Submitted, Workflow, submit
from services.admission.recovery_workflows import recovery_workflows
from services.admission.workflows.invalid_read import (
    AdmissionKey,
    ContinuityRequest,
    InvalidReadContinuity,
)
from services.admission.workflows.recovery import (
    RecoveryKey,
    RecoveryRequest,
    RecoverySubmission,
)
from shared.continuity.recovery import WORKFLOWS
from shared.continuity.recovery import Workflow as RecoveryWorkflow
from shared.contract import method_facts
from shared.contract.modules import SERVICES
from shared.contract.recovery_proto import inputs_from_proto, message_classes
from shared.contract.terms import DIGEST_NAMES, VERSIONS
from shared.runtime.auth import Principal, Role, current_principal, decisions
from shared.runtime.server import ServiceBinding

SERVICE = SERVICES["AdmissionService"]
CANDIDATE_SERVICE = SERVICES["CandidateService"]

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
    """How an RPC is answered (protobuf request → protobuf response)."""

    answer: Callable[[Any, Call], Message]
    #: The message classes of an RPC the service does not declare (a registered recovery
    #: workflow outside the contract, such as a test's own); None: the declaration's.
    messages: tuple[type[Message], type[Message]] | None = None


def submit_route(
    workflow: Workflow[RequestT, Any, ResultT],
    translate: Callable[[ProtoT], RequestT],
    respond: Callable[[Submitted[ResultT]], Message],
) -> Route:
    """A submission run through the submit driver by ``workflow``."""

    def answer(request: ProtoT, call: Call) -> Message:
        return respond(submit(workflow, translate(request), call.identity))

    return Route(answer)


def read_route(
    read: Callable[[KeyT], ResultT],
    translate: Callable[[ProtoT], KeyT],
    respond: Callable[[ResultT], Message],
) -> Route:
    """A read of a stored result by its key."""

    def answer(request: ProtoT, call: Call) -> Message:
        return respond(read(translate(request)))

    return Route(answer)


def caller_permissions_route(table: Mapping[str, Route]) -> Route:
    """The caller's identity, roles and the decision for every admission and candidate RPC.

    ``table`` is the route table being served (this route included once it is added): the roles
    reported are the ones :func:`binding` and the candidate's binding hand to the servers'
    authorization, read from the contract the same way.
    """

    def answer(request: admission_pb2.GetCallerPermissionsRequest, call: Call) -> Message:
        candidate_rpcs = [workflow.rpcs.candidate.name for workflow in WORKFLOWS.values()]
        method_roles = {
            f"/{service.full_name}/{name}": roles
            for service, rpcs in ((SERVICE, list(table)), (CANDIDATE_SERVICE, candidate_rpcs))
            for name, roles in method_facts.method_roles(service, rpcs).items()
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

    return Route(answer)


def recovery_workflows_route() -> Route:
    """The registered recovery workflows, described from the registry as it is when the table is
    built: the workflows this very table routes."""
    described = recovery_workflows(WORKFLOWS.values())

    def answer(request: admission_pb2.ListRecoveryWorkflowsRequest, call: Call) -> Message:
        return described

    return Route(answer)


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


def recovery_routes(workflow: RecoveryWorkflow, downstream: Downstream) -> dict[str, Route]:
    """The submission and the read-back of one registered recovery workflow, translated from
    its own messages by the fields every recovery message shares, the workflow's
    acknowledgements and the inputs its messages declare."""
    submit_messages = message_classes(SERVICE, workflow.rpcs.submit)
    read_messages = message_classes(SERVICE, workflow.rpcs.read)

    def translate(request: Any) -> RecoveryRequest:
        return RecoveryRequest(
            workflow=workflow.name,
            run_id=request.run_id,
            request_id=request.request_id,
            recovery_id=request.recovery_id,
            candidate_digest=request.candidate_digest,
            valid_for_seconds=request.valid_for_seconds,
            acknowledgements={name: getattr(request, name) for name in workflow.acknowledgements},
            inputs=inputs_from_proto(request, present_only=False),
        )

    def respond(submitted: Submitted[common_pb2.RecoveryOutcome]) -> Message:
        response: Message = submit_messages[1](outcome=submitted.result, created=submitted.created)
        return response

    def key(request: Any) -> RecoveryKey:
        return RecoveryKey(request.run_id, request.request_id, workflow.name)

    def read(key: RecoveryKey) -> common_pb2.RecoveryOutcome:
        # The ledger's RECOVERY_NOT_FOUND is the read's answer for an unknown key.
        return downstream.stored_recovery(key).result

    def answer_read(outcome: common_pb2.RecoveryOutcome) -> Message:
        response: Message = read_messages[1](outcome=outcome)
        return response

    submitted = submit_route(RecoverySubmission(workflow, downstream), translate, respond)
    saved = read_route(read, key, answer_read)
    return {
        workflow.rpcs.submit.name: replace(submitted, messages=submit_messages),
        workflow.rpcs.read.name: replace(saved, messages=read_messages),
    }


# --- the table --------------------------------------------------------------------------------


def routes(downstream: Downstream) -> dict[str, Route]:
    """Every RPC of AdmissionService, by name."""

    def saved_ticket(key: AdmissionKey) -> ledger_pb2.AdmissionTicket:
        # The ledger's ADMISSION_NOT_FOUND is the read's answer for an unknown key.
        return downstream.stored_ticket(key).result

    table: dict[str, Route] = {
        "RequestInvalidReadContinuity": submit_route(
            InvalidReadContinuity(VERSIONS[1], downstream),
            _continuity_request(1),
            _v1_response,
        ),
        "RequestInvalidReadContinuityV2": submit_route(
            InvalidReadContinuity(VERSIONS[2], downstream),
            _continuity_request(2),
            _v2_response,
        ),
        "GetInvalidReadContinuity": read_route(saved_ticket, _admission_key, _ticket_response),
    }
    for workflow in WORKFLOWS.values():
        table.update(recovery_routes(workflow, downstream))
    table["ListRecoveryWorkflows"] = recovery_workflows_route()
    # Reads the finished table at call time, so it reports every route, itself included.
    table["GetCallerPermissions"] = caller_permissions_route(table)
    return table


def _behaviour(name: str, route: Route) -> Callable[[Message, grpc.ServicerContext], Message]:
    def behaviour(request: Message, context: grpc.ServicerContext) -> Message:
        return route.answer(request, Call(name, current_principal()))

    return behaviour


def binding(table: Mapping[str, Route]) -> ServiceBinding:
    """Serve ``table`` with the roles the contract declares; it must route every RPC of the
    service (fail closed), and nothing else but the RPCs of registered recovery workflows."""
    registered = {name: route.messages for name, route in table.items() if route.messages}
    declared = set(SERVICE.methods_by_name)
    missing = sorted(declared - set(table))
    unknown = sorted(set(table) - declared - set(registered))
    if missing or unknown:
        raise ValueError(f"{SERVICE.full_name}: no route for {missing}, no RPC for {unknown}")
    return method_facts.service_binding(
        SERVICE, lambda name: _behaviour(name, table[name]), registered
    )


def bindings(downstream: Downstream) -> list[ServiceBinding]:
    return [binding(routes(downstream))]
