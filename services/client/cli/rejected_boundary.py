"""``refusal candidate | submit | show``: the provider request refused before admission.

The administrator's reviewed rejection (``ReviewedProviderRejectionV1``) is read from a JSON file
with the contract's field names; it is sent as a reviewed assertion, never as a receipt.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from google.protobuf import json_format

from forge.continuity.v1 import candidate_pb2
from services.client.cli._command import (
    EXIT_OK,
    Output,
    Subcommands,
    UsageError,
    add_command,
    add_group,
)
from services.client.cli.recoveries import candidate_lines, outcome_lines
from services.client.client import ContinuityClient
from shared.contract import MAX_WINDOW_SECONDS, RECOVERY_ACKNOWLEDGEMENTS

_ACKNOWLEDGEMENTS = RECOVERY_ACKNOWLEDGEMENTS["rejected_boundary"]


def register(commands: Subcommands) -> None:
    refusal = add_group(commands, "refusal", "recover a provider request refused before admission")
    show_candidate = add_command(
        refusal,
        "candidate",
        "show the candidate computed from a reviewed rejection (read-only)",
        _candidate,
    )
    submit = add_command(
        refusal,
        "submit",
        "submit the recovery once; keep RECOVERY_ID and use 'refusal show' after a lost response",
        _submit,
    )
    show = add_command(refusal, "show", "show the saved recovery of a request", _show)
    for command in (show_candidate, submit, show):
        command.add_argument("run_id", metavar="RUN_ID")
        command.add_argument("request_id", metavar="REQUEST_ID")
    for command in (show_candidate, submit):
        command.add_argument(
            "--review",
            required=True,
            metavar="FILE",
            help="JSON file with the ReviewedProviderRejectionV1 fields",
        )
    submit.add_argument("recovery_id", metavar="RECOVERY_ID")
    submit.add_argument(
        "--candidate-digest", required=True, help="the candidate_digest 'refusal candidate' shows"
    )
    submit.add_argument(
        "--valid-for-seconds",
        type=int,
        required=True,
        help=f"requested lease window, 1..{MAX_WINDOW_SECONDS}",
    )
    submit.add_argument(
        "--corrective-provider-epoch",
        required=True,
        help="the provider epoch (configuration or version) the request is sent under next",
    )
    submit.add_argument(
        "--corrective-configuration-digest",
        required=True,
        help="digest of the stored corrective provider configuration document",
    )
    for name in _ACKNOWLEDGEMENTS:
        submit.add_argument("--" + name.replace("_", "-"), action="store_true")


def _review(path: str) -> candidate_pb2.ReviewedProviderRejectionV1:
    try:
        text = Path(path).read_text(encoding="utf-8")
        return json_format.Parse(text, candidate_pb2.ReviewedProviderRejectionV1())
    except (OSError, json_format.ParseError) as error:
        raise UsageError(f"--review {path}: {error}") from error


def _candidate(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
    candidate = client.rejected_boundary_recovery_candidate(
        args.run_id, args.request_id, _review(args.review)
    )
    output.emit(candidate, candidate_lines(candidate))
    return EXIT_OK


def _submit(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
    submitted = client.request_rejected_boundary_recovery(
        args.run_id,
        args.request_id,
        args.recovery_id,
        candidate_digest=args.candidate_digest,
        reviewed_rejection=_review(args.review),
        valid_for_seconds=args.valid_for_seconds,
        corrective_provider=candidate_pb2.CorrectiveProviderConfigurationV1(
            provider_epoch=args.corrective_provider_epoch,
            configuration_digest=args.corrective_configuration_digest,
        ),
        **{name: bool(getattr(args, name)) for name in _ACKNOWLEDGEMENTS},
    )
    output.emit(submitted, outcome_lines(submitted.outcome, submitted.created))
    return EXIT_OK


def _show(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
    outcome = client.rejected_boundary_recovery(args.run_id, args.request_id)
    output.emit(outcome, outcome_lines(outcome))
    return EXIT_OK
