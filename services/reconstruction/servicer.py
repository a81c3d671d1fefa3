"""gRPC servicer: protobuf ↔ domain translation only.

Domain errors propagate unchanged; the server bootstrap maps them to rich statuses.
"""

from __future__ import annotations

from typing import Any

from forge.continuity.v1 import reconstruction_pb2, reconstruction_pb2_grpc
from services.reconstruction.domain import reconstruct_invalid_read
from shared.errors import FieldViolation, InvalidArgument

_VERSIONS = {
    reconstruction_pb2.RECONSTRUCTION_VERSION_V1: 1,
    reconstruction_pb2.RECONSTRUCTION_VERSION_V2: 2,
}


def _required(field: str) -> InvalidArgument:
    return InvalidArgument(
        "FIELD_REQUIRED",
        f"{field} is required",
        metadata={"field": field},
        field_violations=[FieldViolation(field, "required")],
    )


class ReconstructionServicer(reconstruction_pb2_grpc.ReconstructionServiceServicer):
    """Stateless: any replica gives the same bytes for the same request."""

    def ReconstructInvalidRead(
        self, request: reconstruction_pb2.ReconstructInvalidReadRequest, context: Any
    ) -> reconstruction_pb2.ReconstructInvalidReadResponse:
        for field in ("checkpoint", "raw_response", "consumed_at"):
            if not getattr(request, field):
                raise _required(field)
        version = _VERSIONS.get(request.version)
        if version is None:
            raise InvalidArgument(
                "VERSION_UNSUPPORTED",
                "version must be RECONSTRUCTION_VERSION_V1 or _V2",
                metadata={"field": "version"},
                field_violations=[FieldViolation("version", "unspecified or unknown")],
            )
        result = reconstruct_invalid_read(
            request.checkpoint, request.raw_response, version, request.consumed_at
        )
        return reconstruction_pb2.ReconstructInvalidReadResponse(
            derived_checkpoint=result.derived_checkpoint,
            derived_checkpoint_digest=result.derived_checkpoint_digest,
            witness_json=result.witness_json,
            witness_digest=result.witness_digest,
            captured_contract_json=result.captured_contract_json,
            accounting_json=result.accounting_json,
        )
