"""``forge-continuity-worker`` / ``python -m services.worker``: run one admitted continuation.

    FORGE_WORKER_TOKEN=... FORGE_WORKER_PROVIDER_URL=https://.../v1 FORGE_WORKER_PROVIDER_KEY=... \\
    FORGE_WORKER_SOURCE_DIR=/checkout forge-continuity-worker RUN_ID [RUN_ID ...]

It claims the first queued execution request of the named runs, continues it and completes or
fails it, printing one line that says how it ended (exit codes in :mod:`services.worker.run`).
"""

from __future__ import annotations

import argparse
import json
import sys

from forge.continuity.v1 import common_pb2
from services.worker import config as settings
from services.worker.ledger_port import LedgerPort
from services.worker.run import run_once


def echo(entry: common_pb2.JournalEntry) -> None:
    """Print one journal record the worker wrote (or caused the ledger to write)."""
    kind = common_pb2.JournalEntryKind.Name(entry.kind).removeprefix("JOURNAL_ENTRY_KIND_")
    payload = json.loads(entry.payload_json)
    hidden = ("execution_request_id", "lease_generation")
    shown = {k: v for k, v in payload.items() if k not in hidden}
    print(f"journal {entry.sequence:>4} {kind.lower():<20} {json.dumps(shown)[:160]}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="forge-continuity-worker",
        description="Claim and continue one admitted continuation (the reference worker).",
        epilog="Environment: "
        + ", ".join(
            (
                settings.TOKEN,
                settings.PROVIDER_URL,
                settings.PROVIDER_KEY,
                settings.MODEL,
                settings.SOURCE_DIR,
                settings.EVIDENCE_DIR,
                settings.GRANTED_COMMANDS,
                settings.COMMAND_TIMEOUT,
                settings.RUN_IDS,
                "FORGE_LEDGER_TARGET",
            )
        ),
    )
    parser.add_argument("run_ids", nargs="*", help=f"runs to serve (default {settings.RUN_IDS})")
    parser.add_argument("--ledger", default="", help="ledger host:port (FORGE_LEDGER_TARGET)")
    parser.add_argument("--execution-request-id", default="", help="claim only this request")
    parser.add_argument("--verbose", action="store_true", help="print every journal record")
    args = parser.parse_args(argv)
    try:
        config = settings.load(
            args.run_ids,
            ledger_target=args.ledger,
            execution_request_id=args.execution_request_id,
            verbose=args.verbose,
        )
    except settings.ConfigurationError as problem:
        print(f"forge-continuity-worker: {problem}", file=sys.stderr)
        return 4
    port = LedgerPort(config.ledger_target, config.token)
    try:
        outcome = run_once(config, port, echo if config.verbose else None)
    finally:
        port.close()
    print(outcome.message, file=sys.stdout if outcome.exit_code == 0 else sys.stderr, flush=True)
    return outcome.exit_code
