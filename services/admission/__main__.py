"""`python -m services.admission`: serve the admission service."""

from __future__ import annotations

import sys

from forge.continuity.v1 import ledger_pb2_grpc
from services.admission.servicer import bindings
from shared.bootstrap import run_service
from shared.client import open_channel
from shared.config import Settings


def main(argv: list[str] | None = None) -> int:
    def build(settings: Settings):  # type: ignore[no-untyped-def]
        channel = open_channel(settings.targets["ledger"], settings.service_token)
        return bindings(ledger_pb2_grpc.LedgerServiceStub(channel)), channel.close

    return run_service("admission", argv if argv is not None else sys.argv[1:], build)


if __name__ == "__main__":
    raise SystemExit(main())
