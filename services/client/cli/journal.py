"""``journal show | verify`` and ``commands``: a run's native journal and command usage."""

from __future__ import annotations

import argparse

from services.client.cli._command import (
    EXIT_OK,
    EXIT_REFUSED,
    Output,
    Subcommands,
    add_command,
    add_group,
)
from services.client.cli.render import (
    aligned,
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

    usage = add_command(
        commands, "commands", "command usage of a run (charged of limit)", _command_usage
    )
    usage.add_argument("run_id", metavar="RUN_ID")


def _journal_show(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    entries = client.journal(args.run_id, args.from_sequence)
    out.emit(
        {"run_id": args.run_id, "entries": [to_json_object(e) for e in entries]},
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
    )
    return EXIT_OK
