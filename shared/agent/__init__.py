"""The agent's home, shared by the reconstruction service, the worker and the demo: the installed
reference worker adapter (Firefly Agentic 26.10.1 worker, prompt catalog 1.0.1), the sealed
replay of the pinned SDK (``sealed``, ``projection``), and the resume contract of a derived
checkpoint (``envelope``, ``pending``: reading one, the continuation task, the pending request).
Its files are part of the qualified profile's reconstruction code (ADR 0023).

``execute_agentic`` is the entry point the engine calls; ``build_agent`` builds the same agent for
sealed reconstruction. ``historical`` holds the registered historical identities.
"""

from __future__ import annotations

from shared.agent.agent import (
    AGENTIC_VERSION,
    GRANTS,
    MODEL_SETTINGS,
    AgenticTask,
    LocalEffects,
    WorkerEffects,
    build_agent,
    execute_agentic,
)

__all__ = [
    "AGENTIC_VERSION",
    "GRANTS",
    "MODEL_SETTINGS",
    "AgenticTask",
    "LocalEffects",
    "WorkerEffects",
    "build_agent",
    "execute_agentic",
]
