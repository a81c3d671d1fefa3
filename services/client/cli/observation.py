"""``observation candidate | submit | show``: the read-only observation recovery (a consumed
turn whose evidence observation was not retained)."""

from __future__ import annotations

import argparse

from services.client.cli._command import EXIT_OK, Output, Subcommands, add_command, add_group
from services.client.cli.recoveries import candidate_lines, outcome_lines
from services.client.client import ContinuityClient
from shared.contract import MAX_WINDOW_SECONDS, RECOVERY_ACKNOWLEDGEMENTS

_ACKNOWLEDGEMENTS = RECOVERY_ACKNOWLEDGEMENTS["readonly_observation"]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def register(commands: Subcommands) -> None:
    observation = add_group(commands, "observation", "continue past an unavailable evidence read")
    show_candidate = add_command(
        observation,
        "candidate",
        "show the read-only observation candidate: eligibility, digest, holds (read-only)",
        _candidate,
    )
    submit = add_command(
        observation,
        "submit",
        "submit the action once; keep RECOVERY_ID and use 'observation show' after a lost response",
        _submit,
    )
    show = add_command(observation, "show", "show the saved read-only observation action", _show)
    for command in (show_candidate, submit, show):
        command.add_argument("run_id", metavar="RUN_ID")
        command.add_argument("request_id", metavar="REQUEST_ID")
    submit.add_argument("recovery_id", metavar="RECOVERY_ID")
    submit.add_argument(
        "--candidate-digest",
        required=True,
        help="the candidate_digest 'observation candidate' shows",
    )
    submit.add_argument(
        "--valid-for-seconds",
        type=int,
        required=True,
        help=f"requested lease window, 1..{MAX_WINDOW_SECONDS}",
    )
    for name in _ACKNOWLEDGEMENTS:
        submit.add_argument(_flag(name), action="store_true")


def _candidate(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
    candidate = client.readonly_observation_recovery_candidate(args.run_id, args.request_id)
    output.emit(candidate, candidate_lines(candidate))
    return EXIT_OK


def _submit(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
    submitted = client.request_readonly_observation_recovery(
        args.run_id,
        args.request_id,
        args.recovery_id,
        candidate_digest=args.candidate_digest,
        valid_for_seconds=args.valid_for_seconds,
        **{name: bool(getattr(args, name)) for name in _ACKNOWLEDGEMENTS},
    )
    output.emit(submitted, outcome_lines(submitted.outcome, submitted.created))
    return EXIT_OK


def _show(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
    outcome = client.readonly_observation_recovery(args.run_id, args.request_id)
    output.emit(outcome, outcome_lines(outcome))
    return EXIT_OK
