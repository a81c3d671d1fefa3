"""``observation candidate | submit | show``: the read-only observation recovery (a consumed
turn whose evidence observation was not retained)."""

from __future__ import annotations

import argparse

from services.client.cli._command import EXIT_OK, Output, Subcommands
from services.client.cli.recoveries import candidate_lines, outcome_lines, register_recovery_group
from services.client.client import ContinuityClient
from shared.contract.terms import RECOVERY_ACKNOWLEDGEMENTS

_ACKNOWLEDGEMENTS = RECOVERY_ACKNOWLEDGEMENTS["readonly_observation"]


def register(commands: Subcommands) -> None:
    register_recovery_group(
        commands,
        "observation",
        "continue past an unavailable evidence read",
        (
            "show the read-only observation candidate: eligibility, digest, holds (read-only)",
            "submit the action once; keep RECOVERY_ID and use 'observation show' after a lost "
            "response",
            "show the saved read-only observation action",
        ),
        (_candidate, _submit, _show),
        "readonly_observation",
    )


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
