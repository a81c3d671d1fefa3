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
)
from services.client.cli.recoveries import candidate_lines, outcome_lines, register_recovery_group
from services.client.client import ContinuityClient
from shared.contract.terms import RECOVERY_ACKNOWLEDGEMENTS

_ACKNOWLEDGEMENTS = RECOVERY_ACKNOWLEDGEMENTS["rejected_boundary"]


def register(commands: Subcommands) -> None:
    refusal = register_recovery_group(
        commands,
        "refusal",
        "recover a provider request refused before admission",
        (
            "show the candidate computed from a reviewed rejection (read-only)",
            "submit the recovery once; keep RECOVERY_ID and use 'refusal show' after a lost "
            "response",
            "show the saved recovery of a request",
        ),
        (_candidate, _submit, _show),
        "rejected_boundary",
    )
    for command in (refusal.candidate, refusal.submit):
        command.add_argument(
            "--review",
            required=True,
            metavar="FILE",
            help="JSON file with the ReviewedProviderRejectionV1 fields",
        )
    refusal.submit.add_argument(
        "--corrective-provider-epoch",
        required=True,
        help="the provider epoch (configuration or version) the request is sent under next",
    )
    refusal.submit.add_argument(
        "--corrective-configuration-digest",
        required=True,
        help="digest of the stored corrective provider configuration document",
    )


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
