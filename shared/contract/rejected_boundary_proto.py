"""Protobuf translation of ``ReviewedProviderRejectionV1`` and
``CorrectiveProviderConfigurationV1``, shared by the candidate, admission
and ledger servicers so each reads the reviewed rejection the same way."""

from __future__ import annotations

from forge.continuity.v1 import candidate_pb2
from shared.continuity.rejected_boundary import ReviewedRejection
from shared.continuity.rejected_boundary_evidence import CorrectiveProvider


def reviewed_rejection(message: candidate_pb2.ReviewedProviderRejectionV1) -> ReviewedRejection:
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
) -> candidate_pb2.ReviewedProviderRejectionV1:
    return candidate_pb2.ReviewedProviderRejectionV1(
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
    message: candidate_pb2.CorrectiveProviderConfigurationV1,
) -> CorrectiveProvider:
    return CorrectiveProvider(
        provider_epoch=message.provider_epoch,
        configuration_digest=message.configuration_digest,
    )


def corrective_provider_to_proto(
    corrective: CorrectiveProvider,
) -> candidate_pb2.CorrectiveProviderConfigurationV1:
    return candidate_pb2.CorrectiveProviderConfigurationV1(
        provider_epoch=corrective.provider_epoch,
        configuration_digest=corrective.configuration_digest,
    )
