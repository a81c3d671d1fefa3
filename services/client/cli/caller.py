"""``whoami``: the caller's identity, roles, and which admission and candidate RPCs they permit."""

from __future__ import annotations

import argparse

from services.client.cli._command import EXIT_OK, Output, Subcommands, add_command
from services.client.cli.render import permission_lines
from services.client.client import ContinuityClient


def register(commands: Subcommands) -> None:
    add_command(
        commands,
        "whoami",
        "the caller's identity, roles and permitted RPCs",
        _whoami,
    )


def _whoami(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    reply = client.caller_permissions()
    out.emit(reply, permission_lines(reply))
    return EXIT_OK
