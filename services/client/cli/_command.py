"""What every command module shares: exit codes, usage errors, the connection options, the way
a command is registered, and where its output goes."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from google.protobuf.message import Message

from services.client._base import TARGET_VARIABLES, TOKEN_VARIABLE, default_target
from services.client.cli.render import to_json_object
from services.client.client import ContinuityClient

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2

#: ``parser.add_subparsers(...)``'s result, which argparse does not name publicly.
Subcommands = Any


class UsageError(Exception):
    """A command line the parser refuses (exit status 2)."""


def output_file(path: str) -> Path:
    """A file a command writes: its folder is made if missing (``--out var/x`` in a fresh
    checkout); a folder that cannot be made is a usage error, never a traceback."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error}") from None
    return target


class Parser(argparse.ArgumentParser):
    """Raises :class:`UsageError` instead of exiting, so ``main`` decides the output."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


class Output:
    """Where and how a command prints."""

    def __init__(self, as_json: bool, stdout: TextIO) -> None:
        self.as_json = as_json
        self.stdout = stdout

    def emit(
        self, document: Message | dict[str, Any], lines: Sequence[str], *, field: str = ""
    ) -> None:
        """``lines`` for people; with ``--json`` the RPC's response message as the HTTP gateway
        answers it and grpcurl prints it (proto field names, every field): a command that holds
        one field of the response names it as ``field`` and is wrapped in it."""
        if self.as_json:
            value = to_json_object(document) if isinstance(document, Message) else document
            if field:
                value = {field: value}
            self.stdout.write(json.dumps(value, indent=2, sort_keys=False) + "\n")
        else:
            self.stdout.write("\n".join(lines) + "\n")


Handler = Callable[[ContinuityClient, argparse.Namespace, Output], int]


#: The TLS flags: (flag, environment variable, meaning). Any of them set: TLS to every service.
TLS_OPTIONS = (
    ("tls-ca", "FORGE_TLS_CA", "CA bundle that verifies the services (TLS)"),
    ("tls-cert", "FORGE_TLS_CERT", "client certificate, for services that require one (mTLS)"),
    ("tls-key", "FORGE_TLS_KEY", "the client certificate's private key"),
)


def connection_options(parser: argparse.ArgumentParser, env: Mapping[str, str] | None) -> None:
    """The connection options. On the top-level parser they carry the defaults; on each
    subcommand they are accepted too (defaults suppressed) so they may follow the command."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if env is None else value

    group = parser.add_argument_group("connection")
    token_set = bool((env or {}).get(TOKEN_VARIABLE))
    group.add_argument(
        "--token",
        default=default((env or {}).get(TOKEN_VARIABLE, "")),
        # the token itself is never printed, only whether the environment supplies one
        help=f"bearer token (default: ${TOKEN_VARIABLE}, "
        + ("set" if token_set else "not set")
        + ")",
    )
    for service in ("ledger", "candidate", "admission"):
        # The default as it is now (the environment's value, or the local port), so --help
        # says where a call will go.
        target = default_target(service, env) if env is not None else ""
        group.add_argument(
            f"--{service}",
            metavar="HOST:PORT",
            default=default(target),
            help=f"{service} service address (default: {target}, "
            f"from ${TARGET_VARIABLES[service]} or the local default)"
            if env is not None
            else f"{service} service address",
        )
    for flag, variable, meaning in TLS_OPTIONS:
        value = (env or {}).get(variable, "")
        group.add_argument(
            f"--{flag}",
            metavar="PEM",
            default=default(value),
            help=f"{meaning} (default: ${variable}" + (f", {value})" if value else ", not set)")
            if env is not None
            else meaning,
        )
    group.add_argument(
        "--timeout",
        type=float,
        default=default(30.0),
        help="seconds each call may take (default: 30)",
    )
    group.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="machine output: the RPC's response message as proto3 JSON on stdout (as the HTTP "
        'gateway answers it), a refusal as {"error": {...}} on stderr',
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
    command.set_defaults(handler=handler, command_parser=command)
    return command


def flag(name: str) -> str:
    """The flag of a contract field (``valid_for_seconds`` → ``--valid-for-seconds``)."""
    return "--" + name.replace("_", "-")


def acknowledgement_help(sentence: str, note: str = "") -> str:
    """Required; what giving the flag acknowledges: ``sentence``, the words an operator accepts
    (a recovery workflow's from its descriptor's wording), as the rest of a help line."""
    meaning = sentence.strip().rstrip(".")
    if meaning[1:2].islower():  # "The request ..." reads "... that the request ..."
        meaning = meaning[0].lower() + meaning[1:]
    return f"required{note}: acknowledge that {meaning}"


def flag_names(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each contract field a command takes, by the name the operator typed it under: its flag,
    or its positional argument's metavar (refusals name these instead of proto fields)."""
    names: dict[str, str] = {}
    for action in parser._actions:
        if action.dest in ("help", argparse.SUPPRESS):
            continue
        if action.option_strings:
            names[action.dest] = action.option_strings[0]
        elif isinstance(action.metavar, str):
            names[action.dest] = action.metavar
    return names
