"""The current strict ``read_run_evidence`` envelope (worker contract since catalog 1.0.1)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

PAGE_MAX: Final = 10


class CurrentEvidenceQuery(BaseModel):
    """The query object: page defaults to and is capped at ten."""

    model_config = ConfigDict(extra="forbid", strict=True, title="EvidenceQuery")

    run_id: str = Field(pattern=r"^run-[0-9a-z-]{1,64}$")
    kind: Literal["log", "artifact", "test"]
    page: int = Field(default=PAGE_MAX, ge=1, le=PAGE_MAX)


class EvidenceEnvelope(BaseModel):
    """The strict worker envelope: exactly one ``query`` object, nothing else."""

    model_config = ConfigDict(extra="forbid", strict=True, title="read_run_evidence")

    query: CurrentEvidenceQuery


# The approved successor of the old advertised schema (see the tool-contract migration). Written
# out rather than generated so the contract cannot drift with a pydantic upgrade; a test checks it
# agrees with EvidenceEnvelope.
CURRENT_ENVELOPE_SCHEMA: Final[MappingProxyType[str, Any]] = MappingProxyType(
    {
        "type": "object",
        "properties": {
            "query": {
                "type": "object",
                "description": "Evidence query: run_id, kind and an optional page (1-10).",
                "properties": {
                    "run_id": {"type": "string", "pattern": "^run-[0-9a-z-]{1,64}$"},
                    "kind": {"type": "string", "enum": ["log", "artifact", "test"]},
                    "page": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": PAGE_MAX,
                        "default": PAGE_MAX,
                    },
                },
                "required": ["run_id", "kind"],
                "additionalProperties": False,
            }
        },
        "required": ["query"],
        "additionalProperties": False,
    }
)

INVALID_QUERY_RESULT: Final[MappingProxyType[str, str]] = MappingProxyType(
    {"status": "invalid_query"}
)
