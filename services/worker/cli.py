"""``forge-continuity-worker`` / ``python -m services.worker``: run one admitted continuation.

    FORGE_WORKER_TOKEN=... FORGE_WORKER_PROVIDER_URL=https://.../v1 FORGE_WORKER_PROVIDER_KEY=... \\
    FORGE_WORKER_SOURCE_DIR=/checkout forge-continuity-worker RUN_ID [RUN_ID ...]

It claims the first queued execution request of the named runs, continues it and completes or
fails it, printing one line that says how it ended (exit codes in :mod:`services.worker.run`).
SIGTERM or SIGINT stops it within FORGE_WORKER_STOP_GRACE_SECONDS plus one write
(:mod:`services.worker.stopping`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from forge.continuity.v1 import common_pb2
from services.worker import config as settings
from services.worker.ledger_port import LedgerPort
from services.worker.run import run_once
from services.worker.stopping import Shutdown


def _claimed(p: dict[str, Any]) -> str:
    owner = p.get("owner_instance") or {}
    return (
        f"generation {p.get('lease_generation')}, attempt {p.get('attempt_id')}, "
        f"pid {owner.get('pid', '?')}"
    )


def _call(p: dict[str, Any]) -> str:
    return f"{p.get('call_id', '')} {p.get('tool_name', '')}".strip()


#: One line of what each record says (digests shortened).
SUMMARIES: dict[str, Callable[[dict[str, Any]], str]] = {
    "worker_claimed": _claimed,
    "model_request_sent": lambda p: (
        f"{p.get('request_id')}: {p.get('wire_length')} bytes to {p.get('endpoint')}"
    ),
    "response_consumed": lambda p: f"{p.get('request_id')}: {str(p.get('response_digest'))[:19]}…",
    "tool_call_granted": lambda p: f"{_call(p)} ({p.get('grant')})",
    "tool_intent": lambda p: (
        _call(p) + (f" as command {p['command_id']}" if p.get("command_id") else "")
    ),
    "tool_outcome": lambda p: f"{p.get('call_id')} {p.get('status')}",
    "command_executed": lambda p: f"{p.get('command_id')} charged before it runs",
}


def echo(entry: common_pb2.JournalEntry) -> None:
    """Print one journal record the worker wrote (or caused the ledger to write)."""
    kind = common_pb2.JournalEntryKind.Name(entry.kind).removeprefix("JOURNAL_ENTRY_KIND_").lower()
    payload = json.loads(entry.payload_json)
    describe = SUMMARIES.get(kind)
    line = describe(payload) if describe is not None else json.dumps(payload)[:100]
    print(f"journal {entry.sequence:>4} {kind:<19} {line}", flush=True)


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
                settings.SOURCE_REVISION,
                settings.CONFIGURATION_DIGEST,
                settings.SOURCE_PROFILE,
                settings.STOP_GRACE,
                "FORGE_LEDGER_TARGET",
            )
        ),
    )
    parser.add_argument("run_ids", nargs="*", help=f"runs to serve (default {settings.RUN_IDS})")
    parser.add_argument("--ledger", default="", help="ledger host:port (FORGE_LEDGER_TARGET)")
    parser.add_argument("--execution-request-id", default="", help="claim only this request")
    parser.add_argument(
        "--all-runs",
        action="store_true",
        help="fleet mode: claim the oldest eligible queued request of any run",
    )
    parser.add_argument("--verbose", action="store_true", help="print every journal record")
    args = parser.parse_args(argv)
    try:
        config = settings.load(
            args.run_ids,
            ledger_target=args.ledger,
            execution_request_id=args.execution_request_id,
            verbose=args.verbose,
            all_runs=args.all_runs,
        )
    except settings.ConfigurationError as problem:
        print(f"forge-continuity-worker: {problem}", file=sys.stderr)
        return 4
    # SIGTERM/SIGINT: no new effect, the current one finished or abandoned (stopping.py).
    shutdown = Shutdown(config.stop_grace_seconds)
    shutdown.install()
    port = LedgerPort(config.ledger_target, config.token, config.tls)
    try:
        outcome = run_once(config, port, echo if config.verbose else None, shutdown)
    finally:
        port.close()
    if outcome.claims_lost:
        print(f"claims lost to other workers first: {outcome.claims_lost}", flush=True)
    print(outcome.message, file=sys.stdout if outcome.exit_code == 0 else sys.stderr, flush=True)
    return outcome.exit_code
