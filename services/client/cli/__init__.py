"""`forge-continuity` (also `python -m services.client`): the operator CLI of invalid-read
continuity.

Examples (against `make run`, which prints the local development tokens)::

    export FORGE_TOKEN=dev-admin-token
    forge-continuity policy show
    forge-continuity runs list --state held
    forge-continuity runs show run-1
    forge-continuity requests list --state queued --page-size 20
    forge-continuity policy set --expected-revision 1 --enable --window-seconds 3600
    forge-continuity --token dev-operator-token candidate show run-1
    forge-continuity --token dev-operator-token request submit run-1 req-1 \\
        --from-candidate --candidate-digest sha256:... --valid-for-seconds 1800 \\
        --acknowledge-no-new-grant --acknowledge-original-consumption \\
        --acknowledge-renewed-same-attempt-lease
    forge-continuity request show run-1 req-1
    forge-continuity --token dev-admin-operator-token recovery candidate run-1 req-1
    forge-continuity --token dev-admin-operator-token recovery submit run-1 req-1 \\
        rec-1 --candidate-digest sha256:... --valid-for-seconds 900 \\
        --acknowledge-never-claimed --acknowledge-same-request-and-attempt \\
        --acknowledge-budgets-charged --acknowledge-same-attempt-lease
    forge-continuity recovery show run-1 req-1
    forge-continuity --token dev-admin-token reconcile inspect run-1 exr_... rcn-1
    forge-continuity --token dev-admin-token reconcile submit run-1 exr_... rcn-1 \\
        --reconciliation-digest sha256:... --evidence-reference incident-42 \\
        --decision mark_unresolved --cessation-unproven-acknowledged
    forge-continuity reconcile show run-1 exr_...
    forge-continuity journal show run-1
    forge-continuity --json journal verify run-1
    forge-continuity journal export run-1 --out run-1.audit.jsonl
    forge-continuity --token dev-operator-token whoami

Exit status: 0 on success; 1 when a service (or the client's own validation) refuses, or when
``journal verify`` finds a broken chain; 2 for usage errors. Refusals print
``error: CODE REASON: message`` and their details on stderr, naming the command's flags rather
than proto fields. With ``--json`` stdout carries the RPC's response message in proto3 JSON
exactly as the HTTP gateway answers it and grpcurl prints it (proto field names, every field,
int64 as strings), and a refusal is ``{"error": {"code", "reason", "message", "metadata",
"field_violations", "precondition_violations"}}`` on stderr.

Each workflow's commands live in their own module, which exposes ``register(commands)``;
rendering lives in :mod:`services.client.cli.render`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence

from services.client._base import TOKEN_VARIABLE
from services.client.cli import (
    caller,
    heads,
    invalid_read,
    journal,
    listing,
    observation,
    policy,
    reconciliation,
    recoveries,
    rejected_boundary,
)
from services.client.cli._command import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    Handler,
    Output,
    Parser,
    UsageError,
    connection_options,
    flag_names,
)
from services.client.cli.render import error_lines, error_object
from services.client.client import ContinuityClient
from shared.runtime.config import client_tls
from shared.runtime.errors import DomainError

__all__ = ["EXIT_OK", "EXIT_REFUSED", "EXIT_USAGE", "UsageError", "build_parser", "main"]

#: The installed program's name (pyproject's console script), in help and usage lines.
PROGRAM = "forge-continuity"

#: The command modules, in the order their commands are listed in ``--help``.
_WORKFLOWS = (
    policy,
    listing,
    invalid_read,
    recoveries,
    rejected_boundary,
    observation,
    reconciliation,
    journal,
    heads,
    caller,
)


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROGRAM,
        description="Operator CLI of invalid-read continuity: policy, requests, journals.",
        epilog="Exit status: 0 success, 1 refused (or a broken journal chain), 2 usage error.",
    )
    connection_options(parser, env)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for workflow in _WORKFLOWS:
        workflow.register(commands)
    return parser


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run one command; returns the exit status (never raises SystemExit except for --help)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    environment = os.environ if env is None else env
    stdout, stderr = sys.stdout, sys.stderr
    as_json = "--json" in arguments
    names: dict[str, str] = {}
    try:
        parser = build_parser(environment)
        try:
            args = parser.parse_args(arguments)
        except SystemExit as done:  # --help
            return done.code if isinstance(done.code, int) else EXIT_OK
        as_json = bool(args.json)
        names = flag_names(args.command_parser) if hasattr(args, "command_parser") else {}
        if not args.token:
            raise UsageError(f"no token: pass --token or set {TOKEN_VARIABLE}")
        try:
            tls = client_tls(
                {}, ca_file=args.tls_ca, cert_file=args.tls_cert, key_file=args.tls_key
            )
        except ValueError as error:
            raise UsageError(str(error)) from None
        unreadable = tls.unreadable() if tls else []
        if unreadable:
            raise UsageError(f"cannot read {', '.join(unreadable)} (--tls-ca/--tls-cert/--tls-key)")
        with ContinuityClient(
            args.token,
            ledger_target=args.ledger,
            candidate_target=args.candidate,
            admission_target=args.admission,
            timeout=args.timeout,
            tls=tls,
        ) as client:
            handler: Handler = args.handler
            return handler(client, args, Output(as_json, stdout))
    except UsageError as usage:
        if as_json:
            document = {"error": {"code": "USAGE", "message": str(usage)}}
            stderr.write(json.dumps(document, indent=2) + "\n")
        else:
            stderr.write(f"usage error: {usage}\n(see {PROGRAM} --help)\n")
        return EXIT_USAGE
    except DomainError as error:
        if as_json:
            stderr.write(json.dumps(error_object(error, names), indent=2) + "\n")
        else:
            stderr.write("\n".join(error_lines(error, names)) + "\n")
        return EXIT_REFUSED
