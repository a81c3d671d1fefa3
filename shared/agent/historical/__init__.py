"""Registered historical identities of the reference worker.

A historical proof names the pre-callback validator (``EvidenceQuery``) by the SHA-256 of its
complete source file and the advertised ``read_run_evidence`` schema by its canonical digest. The
26.10.1 worker advertised a loose ``query: object`` schema while validating with the strict
``EvidenceQuery``: that mismatch is exactly what lets a query be accepted by the old schema and
rejected by the pinned validator.
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from pydantic import BaseModel

from shared.agent.historical.evidence_query_26_10_1 import EvidenceQuery as EvidenceQuery26101
from shared.continuity.sdk_epochs import (
    ORIGINAL_EVIDENCE_VALIDATOR,
    PUBLISHED_SOURCE_READER,
    REVIEWED_VALIDATOR_SOURCES,
    ValidatorSource,
)

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
    """A registered pre-callback validator: its class and the hash of its complete source. A
    reviewed successor keeps the original's identity (``name``, ``original_source_hash``)."""

    name: str
    source_file: Path
    registered_source_hash: str
    validator: type[BaseModel]
    original_source_hash: str = ""

    def current_source_hash(self) -> str:
        return source_hash(self.source_file)

    @property
    def identity(self) -> tuple[str, str]:
        """(name, original source hash): what a proof rebuilt with this validator names."""
        return self.name, self.original_source_hash or self.registered_source_hash


class SuccessorRefused(ValueError):
    """A would-be successor whose EvidenceQuery class or JSON schema differs from the original."""


def validator_contract(validator: type[BaseModel]) -> dict[str, Any]:
    """What a reviewed successor must keep unchanged: the class name, its configuration, its
    fields and the JSON schema it validates."""
    return {
        "class": validator.__name__,
        "config": {k: repr(v) for k, v in sorted(validator.model_config.items())},
        "fields": {name: repr(info) for name, info in validator.model_fields.items()},
        "schema": validator.model_json_schema(),
    }


def reviewed_successor(
    original: HistoricalValidator,
    *,
    source_file: Path,
    registered_source_hash: str,
    validator: type[BaseModel],
) -> HistoricalValidator:
    """Register a reviewed successor source of ``original``: accepted only when its
    ``EvidenceQuery`` class and JSON schema are unchanged; it keeps the original identity."""
    if validator_contract(validator) != validator_contract(original.validator):
        raise SuccessorRefused(f"{source_file.name}: EvidenceQuery class or JSON schema changed")
    return HistoricalValidator(
        name=original.name,
        source_file=source_file,
        registered_source_hash=registered_source_hash,
        validator=validator,
        original_source_hash=original.registered_source_hash,
    )


EVIDENCE_QUERY_26_10_1: Final = HistoricalValidator(
    name=ORIGINAL_EVIDENCE_VALIDATOR.name,
    source_file=_HERE / f"{ORIGINAL_EVIDENCE_VALIDATOR.module}.py",
    registered_source_hash=ORIGINAL_EVIDENCE_VALIDATOR.source_hash,
    validator=EvidenceQuery26101,
    original_source_hash=ORIGINAL_EVIDENCE_VALIDATOR.source_hash,
)


def _load(source: ValidatorSource) -> HistoricalValidator:
    if source.source_hash == source.original_source_hash:
        return EVIDENCE_QUERY_26_10_1
    module = importlib.import_module(f"{__name__}.{source.module}")
    return reviewed_successor(
        EVIDENCE_QUERY_26_10_1,
        source_file=_HERE / f"{source.module}.py",
        registered_source_hash=source.source_hash,
        validator=module.EvidenceQuery,
    )


# Source hash → validator, from the reviewed sources of shared.continuity.sdk_epochs: the original
# reader and
# any reviewed successor (none yet). Nothing else qualifies.
REGISTERED_VALIDATORS: Final[MappingProxyType[str, HistoricalValidator]] = MappingProxyType(
    {h: _load(source) for h, source in REVIEWED_VALIDATOR_SOURCES.items()}
)


#: The published historical source-reader implementation (never run; pinned by its source hash).
SOURCE_READER_FILE: Path = _HERE / f"{PUBLISHED_SOURCE_READER.module}.py"
