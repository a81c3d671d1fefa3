"""Evidence query validator of the Firefly Agentic 26.10.1 reference worker, kept verbatim.

This file is a registered historical identity: its SHA-256 source hash is pinned in
``services.reconstruction.worker_adapter.historical``. Do not edit or reformat it; a changed
hash makes every historical proof that names it ineligible until reviewed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class EvidenceQuery(BaseModel):
    """One evidence query, validated before the evidence reader starts."""

    model_config = ConfigDict(extra="forbid", strict=True)

    run_id: str = Field(pattern=r"^run-[0-9a-z-]{1,64}$")
    kind: Literal["log", "artifact", "test"]
    page: int = Field(default=1, ge=1, le=10)
