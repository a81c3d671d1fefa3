"""`make demo`'s worker process: claims one execution request, charges one command, reports its
lease generation on stdout and then keeps running until it is killed (the owner lost mid-lease)."""

from __future__ import annotations

import argparse
import sys
import time

from forge.continuity.v1 import execution_pb2, execution_pb2_grpc, ledger_pb2, ledger_pb2_grpc
from shared.continuity.canonical import digest_of
from shared.runtime.client import open_channel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.demo.worker")
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--reader-token", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--execution-request-id", required=True)
    parser.add_argument("--command-id", required=True)
    args = parser.parse_args(argv)
    run = (
        ledger_pb2_grpc.LedgerServiceStub(open_channel(args.ledger, args.reader_token))
        .GetRun(ledger_pb2.GetRunRequest(run_id=args.run_id))
        .run
    )
    worker = execution_pb2_grpc.ExecutionServiceStub(open_channel(args.ledger, args.token))
    claimed = worker.ClaimExecutionRequest(
        execution_pb2.ClaimExecutionRequestRequest(
            execution_request_id=args.execution_request_id,
            attempt_id=run.attempt_id,
            source_revision=run.source_revision,
            configuration_digest=run.configuration_digest,
            source_profile=run.source_profile,
        )
    ).execution_request
    worker.RecordCommand(
        execution_pb2.RecordCommandRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=claimed.lease.generation,
            command_id=args.command_id,
            command_digest=digest_of({"argv": ["make", "build"]}),
        )
    )
    print(f"claimed generation {claimed.lease.generation}", flush=True)
    while True:  # the long-running stage; the demo kills the process here
        time.sleep(60)


if __name__ == "__main__":
    sys.exit(main())
