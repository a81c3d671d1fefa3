"""``journal show | verify | inspect | export`` and ``commands``: a run's native journal, its
audit bundle and command usage."""

from __future__ import annotations

import argparse

from services.client.cli._command import (
    EXIT_OK,
    EXIT_REFUSED,
    Output,
    Subcommands,
    UsageError,
    add_command,
    add_group,
    output_file,
)
from services.client.cli.listing import add_requests_list
from services.client.cli.render import (
    aligned,
    execution_state,
    inspection_lines,
    journal_lines,
    to_json_object,
    verification_lines,
)
from services.client.client import ContinuityClient


def register(commands: Subcommands) -> None:
    actions = add_group(commands, "journal", "read or verify a run's native journal")
    show = add_command(
        actions, "show", "one line per entry: sequence, kind, actor, hash", _journal_show
    )
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument(
        "--from", dest="from_sequence", type=int, default=1, help="first sequence (default 1)"
    )
    verify = add_command(actions, "verify", "recompute the whole hash chain", _journal_verify)
    verify.add_argument("run_id", metavar="RUN_ID")
    inspect = add_command(
        actions,
        "inspect",
        "check the run's stored records and screen them for credentials (read only)",
        _journal_inspect,
    )
    inspect.add_argument("run_id", metavar="RUN_ID")
    export = add_command(
        actions,
        "export",
        "write the run's audit bundle for forge-continuity-verify to check offline",
        _journal_export,
    )
    export.add_argument("run_id", metavar="RUN_ID")
    export.add_argument("--out", required=True, metavar="FILE", help="the bundle file to write")

    usage = add_command(
        commands, "commands", "command usage of a run (charged of limit)", _command_usage
    )
    usage.add_argument("run_id", metavar="RUN_ID")

    requests = add_group(commands, "requests", "execution requests: list, cancel")
    add_requests_list(requests)
    cancel = add_command(
        requests, "cancel", "cancel a queued or claimed request (terminal)", _cancel
    )
    cancel.add_argument("execution_request_id", metavar="EXECUTION_REQUEST_ID")
    cancel.add_argument("--reason", required=True, help="why it is cancelled (recorded)")


def _journal_show(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    entries = client.journal(args.run_id, args.from_sequence)
    out.emit(
        {"entries": [to_json_object(e) for e in entries]},
        journal_lines(entries),
    )
    return EXIT_OK


def _journal_verify(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    result = client.verify_journal(args.run_id)
    out.emit(result, verification_lines(result))
    return EXIT_OK if result.valid else EXIT_REFUSED


def _journal_inspect(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    result = client.inspect_journal(args.run_id)
    out.emit(result, inspection_lines(result))
    return EXIT_OK


def _cancel(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    cancelled = client.cancel_execution_request(args.execution_request_id, args.reason)
    out.emit(
        cancelled,
        aligned(
            [
                ("execution_request_id", cancelled.execution_request_id),
                ("state", execution_state(cancelled)),
            ]
        ),
        field="execution_request",
    )
    return EXIT_OK


def _journal_export(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    try:
        summary = client.export_journal(args.run_id, output_file(args.out))
    except OSError as error:  # the file, not the ledger: a usage error, never a traceback
        raise UsageError(f"cannot write the bundle: {error}") from None
    document = {
        "run_id": summary.run_id,
        "out": summary.path,
        "head": {"sequence": summary.head_sequence, "hash": summary.head_hash},
        "counts": summary.counts,
        "bundle_digest": summary.bundle_digest,
    }
    rows = [
        ("run_id", summary.run_id),
        ("out", summary.path),
        ("head", f"{summary.head_sequence} {summary.head_hash}"),
        *summary.counts.items(),
        ("bundle_digest", summary.bundle_digest),
    ]
    out.emit(
        document,
        [
            *aligned(rows),
            f"verify offline: forge-continuity-verify --trusted-key KEYS {summary.path}",
        ],
    )
    return EXIT_OK


def _command_usage(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    usage = client.command_usage(args.run_id)
    out.emit(
        usage,
        aligned(
            [
                ("used", usage.used),
                ("limit", usage.limit),
                ("remaining", max(usage.limit - usage.used, 0)),
            ]
        ),
        field="usage",
    )
    return EXIT_OK
