"""``refusal candidate | submit | show``: the provider request refused before admission.

The administrator's reviewed rejection (``ReviewedProviderRejectionV1``) and the corrective
provider configuration are read from the review document (``--review FILE``,
``forge.continuity.review/1``, the console's shape too); the rejection is sent as a reviewed
assertion, never as a receipt.
"""

from __future__ import annotations

from services.client.cli._command import Subcommands
from services.client.cli.recoveries import register_recovery_group


def register(commands: Subcommands) -> None:
    register_recovery_group(
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
    )
