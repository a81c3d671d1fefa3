"""The current qualified source profiles.

A profile names the complete installed worker and migration code (worker adapter, Agentic
version, target SDK). Continuity admission and worker claims require the run's profile to be one
of these. Operators extend the set with FORGE_QUALIFIED_SOURCE_PROFILES (comma-separated) once a
new profile passes qualification.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# The profile qualified with this release: the installed worker adapter on Firefly Agentic
# 26.10.1 with the pinned target SDK pydantic-ai-slim 2.55.0.
DEFAULT_QUALIFIED_PROFILE = "forge-worker/firefly-agentic-26.10.1/pydantic-ai-2.55.0"


def qualified_profiles(env: Mapping[str, str] | None = None) -> frozenset[str]:
    env = os.environ if env is None else env
    extra = env.get("FORGE_QUALIFIED_SOURCE_PROFILES", "")
    return frozenset(
        {DEFAULT_QUALIFIED_PROFILE, *(p.strip() for p in extra.split(",") if p.strip())}
    )


def is_qualified(profile: str, env: Mapping[str, str] | None = None) -> bool:
    return profile in qualified_profiles(env)
