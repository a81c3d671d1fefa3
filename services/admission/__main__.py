"""`python -m services.admission`: serve the admission service."""

from __future__ import annotations

import sys

from forge.continuity.v1 import candidate_pb2_grpc, ledger_pb2_grpc
from services.admission.downstream import Downstream
from services.admission.servicer import bindings
from shared.continuity.serving import profile_preflight
from shared.contract.channels import service_channel
from shared.runtime.auth import PrincipalsFile
from shared.runtime.bootstrap import BuildResult, run_service
from shared.runtime.config import Settings


def main(argv: list[str] | None = None) -> int:
    def build(settings: Settings, _principals: PrincipalsFile) -> BuildResult:
        channels = {name: service_channel(settings, name) for name in ("ledger", "candidate")}
        downstream = Downstream(
            ledger=ledger_pb2_grpc.LedgerServiceStub(channels["ledger"]),
            candidate=candidate_pb2_grpc.CandidateServiceStub(channels["candidate"]),
        )

        def close() -> None:
            for channel in channels.values():
                channel.close()

        return BuildResult(bindings(downstream), close)

    return run_service(
        "admission",
        argv if argv is not None else sys.argv[1:],
        build,
        # Not reconstruction: admission never calls it (the candidate brings the derived
        # checkpoint its reconstruction produced), so it does not wait for it either.
        depends_on=("ledger", "candidate"),
        preflight=profile_preflight,
    )


if __name__ == "__main__":
    raise SystemExit(main())
