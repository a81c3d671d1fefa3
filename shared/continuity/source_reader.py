"""The ledger's side of the source-reader pin: a derived checkpoint that appends a source
reader's result names the published historical source reader (docs/formats.md, "Source-reader
pin"). Apart from ``sdk_epochs``, which the historical fixture environment imports without gRPC."""

from __future__ import annotations

from shared.continuity.derived_format import DerivedClaims
from shared.continuity.sdk_epochs import (
    PUBLISHED_SOURCE_READER,
    reads_the_source,
    source_reader_problem,
)
from shared.runtime.errors import FailedPrecondition


def check_source_reader_pin(claims: DerivedClaims) -> None:
    """A derived checkpoint that appends a source reader's result (version 2's unavailable
    list_files observation, a retained one) names the pinned published source reader:
    FAILED_PRECONDITION SOURCE_READER_UNPINNED when it names none or another."""
    if not reads_the_source(claims.appended_results):
        return
    named = claims.source_reader
    problem = source_reader_problem(named)
    if problem is not None:
        pinned = PUBLISHED_SOURCE_READER.pin()
        raise FailedPrecondition(
            "SOURCE_READER_UNPINNED",
            problem,
            metadata={
                "field": "reconstruction.source_reader",
                "name": pinned["name"],
                "expected": pinned["source_hash"],
                "found": str(named.get("source_hash", "")) if isinstance(named, dict) else "",
            },
        )
