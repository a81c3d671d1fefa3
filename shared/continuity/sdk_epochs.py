"""The known SDK epochs of stored records, and the reviewed evidence-validator sources.

Both the reconstruction service (which migrates records) and the ledger's journal inspection
(which only reads them) need to know which record formats and runtimes exist, without the ledger
importing the SDK. A record is of a known epoch only when its format and its complete runtime
identity are one of these.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

HISTORICAL_FORMAT: Final = "firefly.agentic.checkpoint/3"
DERIVED_FORMAT: Final = "forge.continuity.derived-checkpoint/1"
# The exact top-level keys of a derived checkpoint: the reconstruction service that writes and
# re-reads them and the ledger's inspection that only reads them agree on one set.
DERIVED_KEYS: Final = frozenset(
    {
        "format",
        "compatibility",
        "source",
        "reconstruction",
        "state",
        "state_digest",
        "witness_digest",
        "contract_digest",
        "accounting_digest",
    }
)

# Runtime identity a historical checkpoint must carry exactly (field → value).
SOURCE_RUNTIME: Final[MappingProxyType[str, str]] = MappingProxyType(
    {
        "agentic": "26.10.1",
        "pydantic_ai": "2.58.0",
        "openai": "3.57.0",
        "genai_prices": "0.2.3",
        "prompt_catalog": "1.0.0",
    }
)
TARGET_RUNTIME: Final[MappingProxyType[str, str]] = MappingProxyType(
    {
        "agentic": "26.10.1",
        "pydantic_ai": "2.55.0",
        "openai": "3.57.0",
        "genai_prices": "0.2.3",
        "prompt_catalog": "1.0.1",
    }
)
TRANSITION_ID: Final = "firefly-agentic-26.10.1/pydantic-ai-2.58.0-to-2.55.0"


def epoch_name(runtime: MappingProxyType[str, str]) -> str:
    """e.g. ``firefly-agentic-26.10.1/pydantic-ai-2.58.0``."""
    return f"firefly-agentic-{runtime['agentic']}/pydantic-ai-{runtime['pydantic_ai']}"


# Format → the runtime its records carry.
KNOWN_EPOCHS: Final[MappingProxyType[str, MappingProxyType[str, str]]] = MappingProxyType(
    {HISTORICAL_FORMAT: SOURCE_RUNTIME, DERIVED_FORMAT: TARGET_RUNTIME}
)


@dataclass(frozen=True)
class ValidatorSource:
    """A reviewed evidence-validator source: the original reader, or a reviewed successor whose
    ``EvidenceQuery`` class and JSON schema are unchanged. A successor keeps the original's
    identity (``name``, ``original_source_hash``)."""

    name: str
    source_hash: str
    original_source_hash: str
    module: str  # module of shared.agent.historical holding the class

    @property
    def standing(self) -> str:
        return "original" if self.source_hash == self.original_source_hash else "reviewed_successor"


ORIGINAL_EVIDENCE_VALIDATOR: Final = ValidatorSource(
    name="firefly-agentic/26.10.1/EvidenceQuery",
    source_hash="sha256:44085ec25fc9e782fd0637dd57fe430cf34a511da79d98c5438f4ada43ff3490",
    original_source_hash="sha256:44085ec25fc9e782fd0637dd57fe430cf34a511da79d98c5438f4ada43ff3490",
    module="evidence_query_26_10_1",
)

# Source hash → reviewed source. Adding a reviewed successor is a reviewed change here (its module
# beside the original; the reconstruction package refuses to load one whose class or schema
# differs). Any other source hash is ineligible until reviewed.
REVIEWED_VALIDATOR_SOURCES: Final[MappingProxyType[str, ValidatorSource]] = MappingProxyType(
    {ORIGINAL_EVIDENCE_VALIDATOR.source_hash: ORIGINAL_EVIDENCE_VALIDATOR}
)


def validator_standing(named_source_hash: object) -> ValidatorSource | None:
    """The reviewed source a record names, or None (unreviewed: ineligible until reviewed)."""
    if not isinstance(named_source_hash, str):
        return None
    return REVIEWED_VALIDATOR_SOURCES.get(named_source_hash)


@dataclass(frozen=True)
class SourceReaderIdentity:
    """The published historical source-reader implementation a version-2 or read-only
    observation proof pins: the historical worker's ``list_files`` by name, version and the
    SHA-256 of its published source file (docs/formats.md, "Source-reader pin")."""

    name: str
    version: str
    source_hash: str
    module: str  # module of shared.agent.historical holding it

    def pin(self) -> dict[str, str]:
        """What a proof names: ``{"name", "version", "source_hash"}``."""
        return {"name": self.name, "version": self.version, "source_hash": self.source_hash}


PUBLISHED_SOURCE_READER: Final = SourceReaderIdentity(
    name="firefly-agentic/26.10.1/list_files",
    version="26.10.1",
    source_hash="sha256:eae639a36f67e1310393a95d3d776eeef8762c7a5c19e28d2e54c3b91e1e5d7d",
    module="source_reader_26_10_1",
)
#: The tools whose results a proof takes from the source reader (its pin applies to them).
SOURCE_READER_TOOLS: Final = frozenset({"list_files"})


def source_reader_problem(named: object) -> str | None:
    """Why the source-reader identity a proof names is not the pinned one (None: it is)."""
    pinned = PUBLISHED_SOURCE_READER.pin()
    if named is None:
        return f"the proof names no source reader; {pinned['name']} is pinned"
    if named != pinned:
        return f"the proof names source reader {named!r}, not the pinned {pinned!r}"
    return None


def reads_the_source(appended_results: object) -> bool:
    """Whether a derived checkpoint's appended results include a source reader's call."""
    return isinstance(appended_results, list) and any(
        isinstance(item, dict) and item.get("tool_name") in SOURCE_READER_TOOLS
        for item in appended_results
    )
