"""``observation candidate | submit | show``: the read-only observation recovery (a consumed
turn whose evidence observation was not retained)."""

from __future__ import annotations

from services.client.cli._command import Subcommands
from services.client.cli.recoveries import register_recovery_group


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
        "readonly_observation",
    )
