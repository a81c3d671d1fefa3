"""``refusal candidate | submit | show``: the provider request refused before admission.

The administrator's reviewed rejection (``ReviewedProviderRejectionV1``) is read from a JSON file
with the contract's field names; it is sent as a reviewed assertion, never as a receipt.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from forge.continuity.v1 import common_pb2
from services.client.cli._command import Subcommands, UsageError
from services.client.cli.recoveries import register_recovery_group


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
        "rejected_boundary",
        _inputs,
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


def _review(path: str) -> common_pb2.ReviewedProviderRejectionV1:
    try:
        text = Path(path).read_text(encoding="utf-8")
        return json_format.Parse(text, common_pb2.ReviewedProviderRejectionV1())
    except (OSError, json_format.ParseError) as error:
        raise UsageError(f"--review {path}: {error}") from error


def _inputs(args: argparse.Namespace, submitting: bool) -> dict[str, Any]:
    """The reviewed rejection, and for the submission the corrective provider configuration."""
    found: dict[str, Any] = {"reviewed_rejection": _review(args.review)}
    if submitting:
        found["corrective_provider"] = common_pb2.CorrectiveProviderConfigurationV1(
            provider_epoch=args.corrective_provider_epoch,
            configuration_digest=args.corrective_configuration_digest,
        )
    return found
