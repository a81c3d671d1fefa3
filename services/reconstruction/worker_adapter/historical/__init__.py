"""Registered historical identities of the reference worker.

A historical proof names the pre-callback validator (``EvidenceQuery``) by the SHA-256 of its
complete source file and the advertised ``read_run_evidence`` schema by its canonical digest. The
26.10.1 worker advertised a loose ``query: object`` schema while validating with the strict
``EvidenceQuery``: that mismatch is exactly what lets a query be accepted by the old schema and
rejected by the pinned validator.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from pydantic import BaseModel

from .evidence_query_26_10_1 import EvidenceQuery as EvidenceQuery26101

_HERE = Path(__file__).resolve().parent

# The read_run_evidence parameters schema the 26.10.1 worker advertised to the model.
OLD_ADVERTISED_SCHEMA: Final[MappingProxyType[str, Any]] = MappingProxyType(
    {
        "type": "object",
        "properties": {
            "query": {"type": "object", "description": "Evidence query naming the run and kind."}
        },
        "required": ["query"],
        "additionalProperties": False,
    }
)


def source_hash(path: Path) -> str:
    """``sha256:<hex>`` of a source file's exact bytes."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class HistoricalValidator:
    """A registered pre-callback validator: its class and the hash of its complete source."""

    name: str
    source_file: Path
    registered_source_hash: str
    validator: type[BaseModel]

    def current_source_hash(self) -> str:
        return source_hash(self.source_file)


# Source hash → validator. A reviewed successor with an unchanged EvidenceQuery class and JSON
# schema would be added here under its own hash; nothing else qualifies.
EVIDENCE_QUERY_26_10_1: Final = HistoricalValidator(
    name="firefly-agentic/26.10.1/EvidenceQuery",
    source_file=_HERE / "evidence_query_26_10_1.py",
    registered_source_hash=(
        "sha256:44085ec25fc9e782fd0637dd57fe430cf34a511da79d98c5438f4ada43ff3490"
    ),
    validator=EvidenceQuery26101,
)

REGISTERED_VALIDATORS: Final[MappingProxyType[str, HistoricalValidator]] = MappingProxyType(
    {EVIDENCE_QUERY_26_10_1.registered_source_hash: EVIDENCE_QUERY_26_10_1}
)
