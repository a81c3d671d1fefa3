"""ListRecoveryWorkflows: the recovery-workflow registry described to an operator's tool.

Everything in the answer is read from the registry (``shared.continuity.recovery``: names,
numbers, actions, acknowledgements and their sentences, inputs, roles, policy switch, when a
workflow applies) and from the contract's descriptors (each RPC's HTTP binding, the message
types of the inputs), so the console and the CLI render a workflow the services route without a
list of their own. The answer is built once, with the route table, from the workflows registered
then: it describes exactly what the service serves.
"""

from __future__ import annotations

from collections.abc import Iterable

from google.api import annotations_pb2
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor

from forge.continuity.v1 import admission_pb2, candidate_pb2, common_pb2
from shared.continuity.recovery import Rpc, Workflow
from shared.contract.recovery_proto import WIRE_INPUTS, message_classes

ADMISSION = admission_pb2.DESCRIPTOR.services_by_name["AdmissionService"]
CANDIDATE = candidate_pb2.DESCRIPTOR.services_by_name["CandidateService"]
_HTTP_METHODS = ("get", "put", "post", "delete", "patch")


def _binding(method: MethodDescriptor | None) -> tuple[str, str, str]:
    """(HTTP method, path template, body) of an RPC's http rule; empty without one."""
    if method is None or not method.GetOptions().HasExtension(annotations_pb2.http):
        return "", "", ""
    rule = method.GetOptions().Extensions[annotations_pb2.http]
    pattern = rule.WhichOneof("pattern")
    if pattern not in _HTTP_METHODS:
        raise ValueError(f"{method.full_name}: no plain HTTP method in its http rule")
    return pattern.upper(), str(getattr(rule, pattern)), rule.body


#: The saved ticket's route: every recovery route continues it.
REQUEST_PATH = _binding(ADMISSION.methods_by_name["GetInvalidReadContinuity"])[1]


def _call(service: ServiceDescriptor, rpc: Rpc) -> admission_pb2.RecoveryWorkflowCall:
    http_method, path, body = _binding(service.methods_by_name.get(rpc.name))
    if path and not path.startswith(REQUEST_PATH + "/"):
        raise ValueError(f"{rpc.name}: its route {path} does not continue {REQUEST_PATH}")
    return admission_pb2.RecoveryWorkflowCall(
        rpc=f"/{service.full_name}/{rpc.name}",
        http_method=http_method,
        path=path.removeprefix(REQUEST_PATH),
        body=body,
    )


def _inputs(workflow: Workflow) -> list[admission_pb2.RecoveryInput]:
    """The operator inputs the submission's message declares (the derived checkpoint is the
    candidate's, never the operator's), and whether the candidate request carries them too."""
    submit = message_classes(ADMISSION, workflow.rpcs.submit)[0].DESCRIPTOR
    candidate = message_classes(CANDIDATE, workflow.rpcs.candidate)[0].DESCRIPTOR
    return [
        admission_pb2.RecoveryInput(
            field=wire.field,
            kind=wire.kind,  # type: ignore[arg-type]
            message_type=submit.fields_by_name[wire.field].message_type.full_name,
            candidate=wire.field in candidate.fields_by_name,
        )
        for wire in WIRE_INPUTS
        if wire.attribute in workflow.inputs and wire.field in submit.fields_by_name
    ]


def describe(workflow: Workflow) -> admission_pb2.RecoveryWorkflowDescription:
    wording = workflow.wording
    return admission_pb2.RecoveryWorkflowDescription(
        name=workflow.name,
        workflow=workflow.number,  # type: ignore[arg-type]
        title=wording.heading or workflow.describe(),
        action=workflow.action,
        applies=admission_pb2.RecoveryApplicability(
            failed_after_claim=workflow.applies.claimed,
            follows=workflow.applies.follows,
            situation=wording.situation,
        ),
        candidate=_call(CANDIDATE, workflow.rpcs.candidate),
        submit=_call(ADMISSION, workflow.rpcs.submit),
        read=_call(ADMISSION, workflow.rpcs.read),
        acknowledgements=[
            admission_pb2.RecoveryAcknowledgement(
                field=name, text=dict(wording.acknowledgements).get(name, "")
            )
            for name in workflow.acknowledgements
        ],
        inputs=_inputs(workflow),
        roles=sorted(common_pb2.Role.Value(f"ROLE_{role.upper()}") for role in workflow.roles),
        policy_switch=workflow.policy_switch or "",
        review=wording.review,
        review_note=wording.note,
    )


def recovery_workflows(
    workflows: Iterable[Workflow],
) -> admission_pb2.ListRecoveryWorkflowsResponse:
    """The answer for ``workflows`` (the registry's, in its order)."""
    return admission_pb2.ListRecoveryWorkflowsResponse(
        workflows=[describe(workflow) for workflow in workflows], request_path=REQUEST_PATH
    )
