"""What every command module shares: exit codes, usage errors, the connection options, the way
a command is registered, and where its output goes."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, TextIO

from google.protobuf.message import Message

from services.client._base import TOKEN_VARIABLE, default_target
from services.client.cli.render import to_json_object
from services.client.client import ContinuityClient

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2

#: ``parser.add_subparsers(...)``'s result, which argparse does not name publicly.
Subcommands = Any


class UsageError(Exception):
    """A command line the parser refuses (exit status 2)."""


class Parser(argparse.ArgumentParser):
    """Raises :class:`UsageError` instead of exiting, so ``main`` decides the output."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


class Output:
    """Where and how a command prints."""

    def __init__(self, as_json: bool, stdout: TextIO) -> None:
        self.as_json = as_json
        self.stdout = stdout

    def emit(self, document: Message | dict[str, Any], lines: Sequence[str]) -> None:
        if self.as_json:
            value = to_json_object(document) if isinstance(document, Message) else document
            self.stdout.write(json.dumps(value, indent=2, sort_keys=False) + "\n")
        else:
            self.stdout.write("\n".join(lines) + "\n")


Handler = Callable[[ContinuityClient, argparse.Namespace, Output], int]


def connection_options(parser: argparse.ArgumentParser, env: Mapping[str, str] | None) -> None:
    """The connection options. On the top-level parser they carry the defaults; on each
    subcommand they are accepted too (defaults suppressed) so they may follow the command."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if env is None else value

    group = parser.add_argument_group("connection")
    group.add_argument(
        "--token",
        default=default((env or {}).get(TOKEN_VARIABLE, "")),
        help=f"bearer token (default: ${TOKEN_VARIABLE})",
    )
    for service in ("ledger", "candidate", "admission"):
        group.add_argument(
            f"--{service}",
            metavar="HOST:PORT",
            default=default(default_target(service, env) if env is not None else ""),
            help=f"{service} service (default: $FORGE_{service.upper()}_TARGET or 127.0.0.1:port)",
        )
    group.add_argument(
        "--timeout",
        type=float,
        default=default(30.0),
        help="seconds each call may take (default 30)",
    )
    group.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="machine output: protobuf JSON on stdout, errors as JSON on stderr",
    )


def add_group(commands: Subcommands, name: str, help_text: str) -> Subcommands:
    """A command with actions (``policy show``, ``policy set``): returns where they go."""
    group = commands.add_parser(name, help=help_text)
    return group.add_subparsers(dest="action", required=True, metavar="ACTION")


def add_command(
    commands: Subcommands, name: str, help_text: str, handler: Handler
) -> argparse.ArgumentParser:
    """A command that runs ``handler``; it accepts the connection options too."""
    command: argparse.ArgumentParser = commands.add_parser(
        name, help=help_text, description=help_text
    )
    connection_options(command, None)
    command.set_defaults(handler=handler)
    return command
