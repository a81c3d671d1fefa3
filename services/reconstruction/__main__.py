"""`python -m services.reconstruction`: serve the stateless reconstruction service."""

from __future__ import annotations

import sys

from forge.continuity.v1 import reconstruction_pb2, reconstruction_pb2_grpc
from services.reconstruction.servicer import ReconstructionServicer
from shared.runtime.auth import ANY_ROLE
from shared.runtime.bootstrap import BuildResult, run_service
from shared.runtime.config import Settings
from shared.runtime.server import ServiceBinding


def bindings() -> list[ServiceBinding]:
    servicer = ReconstructionServicer()
    return [
        ServiceBinding(
            reconstruction_pb2.DESCRIPTOR.services_by_name["ReconstructionService"],
            lambda server: reconstruction_pb2_grpc.add_ReconstructionServiceServicer_to_server(
                servicer, server
            ),
            # Pure computation over bytes the caller already holds: any authenticated caller.
            {
                "ReconstructInvalidRead": ANY_ROLE,
                "AnalyzeConsumedResponse": ANY_ROLE,
                "AnalyzeAndReconstructInvalidRead": ANY_ROLE,
                "ReproducePendingRequest": ANY_ROLE,
                "ReconstructReadonlyObservation": ANY_ROLE,
            },
        )
    ]


def main(argv: list[str] | None = None) -> int:
    def build(settings: Settings) -> BuildResult:
        return bindings(), lambda: None

    return run_service("reconstruction", argv if argv is not None else sys.argv[1:], build)


if __name__ == "__main__":
    raise SystemExit(main())
