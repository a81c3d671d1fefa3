"""Protobuf translation of the recovery workflows' contract, shared by the candidate, admission
and ledger servicers and the client so each reads a workflow the same way: the workflow's
``RecoveryWorkflow`` value, its RPCs' message types, and the inputs a workflow carries beyond the
common fields (``ReviewedProviderRejectionV1``, ``CorrectiveProviderConfigurationV1``), read from
whichever message declares them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pool
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from forge.continuity.v1 import admission_pb2, common_pb2
from shared.continuity.recovery import DerivedCheckpoint, Inputs, Rpc, Workflow
from shared.continuity.recovery import workflow as recovery_workflow
from shared.continuity.recovery.rejected_boundary.custody import ReviewedRejection
from shared.continuity.recovery.rejected_boundary.evidence import CorrectiveProvider


def reviewed_rejection(message: common_pb2.ReviewedProviderRejectionV1) -> ReviewedRejection:
    """The reviewed rejection as plain data, field by field."""
    return ReviewedRejection(
        provider_epoch=message.provider_epoch,
        wire_digest=message.wire_digest,
        wire_length=message.wire_length,
        endpoint=message.endpoint,
        principal=message.principal,
        model=message.model,
        source_revision=message.source_revision,
        executable_identity=message.executable_identity,
        source_validator_report_digest=message.source_validator_report_digest,
        executable_probe_report_digest=message.executable_probe_report_digest,
        admissions=message.admissions,
        jobs=message.jobs,
        provider_dispatches=message.provider_dispatches,
        tool_callbacks=message.tool_callbacks,
    )


def reviewed_rejection_to_proto(
    review: ReviewedRejection,
) -> common_pb2.ReviewedProviderRejectionV1:
    return common_pb2.ReviewedProviderRejectionV1(
        provider_epoch=review.provider_epoch,
        wire_digest=review.wire_digest,
        wire_length=review.wire_length,
        endpoint=review.endpoint,
        principal=review.principal,
        model=review.model,
        source_revision=review.source_revision,
        executable_identity=review.executable_identity,
        source_validator_report_digest=review.source_validator_report_digest,
        executable_probe_report_digest=review.executable_probe_report_digest,
        admissions=review.admissions,
        jobs=review.jobs,
        provider_dispatches=review.provider_dispatches,
        tool_callbacks=review.tool_callbacks,
    )


def corrective_provider(
    message: common_pb2.CorrectiveProviderConfigurationV1,
) -> CorrectiveProvider:
    return CorrectiveProvider(
        provider_epoch=message.provider_epoch,
        configuration_digest=message.configuration_digest,
    )


def corrective_provider_to_proto(
    corrective: CorrectiveProvider,
) -> common_pb2.CorrectiveProviderConfigurationV1:
    return common_pb2.CorrectiveProviderConfigurationV1(
        provider_epoch=corrective.provider_epoch,
        configuration_digest=corrective.configuration_digest,
    )


@dataclass(frozen=True)
class _WireInput:
    """One :class:`Inputs` attribute as a contract field of its own message type."""

    attribute: str
    field: str
    read: Callable[[Any], Any]
    write: Callable[[Any], Message]
    #: Its contract message (what a review document holds it as).
    message: type[Message]
    #: What an operator supplies it as (``RecoveryInputKind``, for ListRecoveryWorkflows).
    kind: int


#: Every input a recovery message may declare; a message carries those it declares.
WIRE_INPUTS = (
    _WireInput(
        "reviewed",
        "reviewed_rejection",
        reviewed_rejection,
        reviewed_rejection_to_proto,
        common_pb2.ReviewedProviderRejectionV1,
        admission_pb2.RECOVERY_INPUT_KIND_REVIEWED_PROVIDER_REJECTION,
    ),
    _WireInput(
        "corrective",
        "corrective_provider",
        corrective_provider,
        corrective_provider_to_proto,
        common_pb2.CorrectiveProviderConfigurationV1,
        admission_pb2.RECOVERY_INPUT_KIND_CORRECTIVE_PROVIDER_CONFIGURATION,
    ),
)


def workflow_number(name: str) -> common_pb2.RecoveryWorkflow.ValueType:
    """The contract's ``RecoveryWorkflow`` value of a stored workflow name."""
    return common_pb2.RecoveryWorkflow.ValueType(recovery_workflow(name).number)


def message_classes(service: ServiceDescriptor, rpc: Rpc) -> tuple[Any, Any]:
    """The request and response classes of ``rpc``: the service's declaration, or the full
    names a workflow the contract does not declare gives."""
    method = service.methods_by_name.get(rpc.name)
    if method is not None:
        return GetMessageClass(method.input_type), GetMessageClass(method.output_type)
    pool = descriptor_pool.Default()
    return (
        GetMessageClass(pool.FindMessageTypeByName(rpc.request_type)),
        GetMessageClass(pool.FindMessageTypeByName(rpc.response_type)),
    )


def declared_inputs(descriptor: Any, workflow: Workflow) -> tuple[str, ...]:
    """The contract fields of the workflow's inputs that a message declares."""
    return tuple(
        wire.field
        for wire in WIRE_INPUTS
        if wire.attribute in workflow.inputs and wire.field in descriptor.fields_by_name
    )


def inputs_from_proto(
    message: Message, *, present_only: bool, derived: DerivedCheckpoint | None = None
) -> Inputs:
    """The inputs ``message`` declares (only those set when ``present_only``; otherwise an
    unset one reads as its empty value, which its validation refuses)."""
    fields = message.DESCRIPTOR.fields_by_name
    values = {
        wire.attribute: wire.read(getattr(message, wire.field))
        for wire in WIRE_INPUTS
        if wire.field in fields and (not present_only or message.HasField(wire.field))
    }
    return Inputs(derived=derived, **values)


def inputs_to_proto(inputs: Inputs, descriptor: Any) -> dict[str, Any]:
    """The fields of ``inputs`` a message of ``descriptor`` declares."""
    return {
        wire.field: wire.write(value)
        for wire in WIRE_INPUTS
        if (value := getattr(inputs, wire.attribute)) is not None
        and wire.field in descriptor.fields_by_name
    }
