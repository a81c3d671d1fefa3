"""What every service process hands the runtime from above it (shared.runtime.bootstrap does not
import the rules): the qualified profile check it runs before serving (ADR 0023)."""

from __future__ import annotations

from shared.continuity.qualification import RegistryError, load_at_startup
from shared.runtime.bootstrap import RefusedToServe


def profile_preflight() -> str:
    """The installed profile digest is computed and the profile registry read before serving,
    so a malformed registry stops the service here, not at its first admission."""
    try:
        profile = load_at_startup()
    except RegistryError as refused:
        raise RefusedToServe(str(refused)) from refused
    return f"installed profile digest {profile.digest}"
