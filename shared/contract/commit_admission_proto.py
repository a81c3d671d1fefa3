"""Protobuf translation of ``CommitAdmission`` (``CommitAdmissionRequest``), one function each
way: admission writes the request, the ledger's servicer reads it."""

from __future__ import annotations

from forge.continuity.v1 import common_pb2, ledger_pb2
from shared.continuity.commit_admission import CommitAdmission
from shared.contract.terms import DIGEST_NAMES


def commit_admission_to_proto(admission: CommitAdmission) -> ledger_pb2.CommitAdmissionRequest:
    return ledger_pb2.CommitAdmissionRequest(
        run_id=admission.run_id,
        request_id=admission.request_id,
        operator_identity=admission.operator_identity,
        request_content_digest=admission.request_content_digest,
        expected_head_hash=admission.expected_head_hash,
        policy_revision=admission.policy_revision,
        digests=common_pb2.ContinuityDigests(
            **{name: admission.digests[name] for name in DIGEST_NAMES}
        ),
        version=admission.version,
        valid_for_seconds=admission.valid_for_seconds,
        derived_checkpoint_digest=admission.derived_checkpoint_digest,
        consumed_response_digest=admission.consumed_response_digest,
        witness_digest=admission.witness_digest,
        derived_checkpoint=admission.derived_checkpoint,
    )


def commit_admission_from_proto(request: ledger_pb2.CommitAdmissionRequest) -> CommitAdmission:
    return CommitAdmission(
        run_id=request.run_id,
        request_id=request.request_id,
        operator_identity=request.operator_identity,
        request_content_digest=request.request_content_digest,
        expected_head_hash=request.expected_head_hash,
        policy_revision=request.policy_revision,
        digests={name: getattr(request.digests, name) for name in DIGEST_NAMES},
        version=request.version,
        valid_for_seconds=request.valid_for_seconds,
        derived_checkpoint_digest=request.derived_checkpoint_digest,
        consumed_response_digest=request.consumed_response_digest,
        witness_digest=request.witness_digest,
        derived_checkpoint=request.derived_checkpoint,
    )
