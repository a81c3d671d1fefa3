"""The payload members that name a stored blob by digest (docs/formats.md, "Audit bundle", "Blob
references"): one definition for the ledger, which refuses a payload naming anything but a digest
there, and for the export, which writes every named blob into the bundle. The offline verifier
keeps its own copy (it imports nothing of ours); tests/audit holds the two equal."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from shared.continuity.canonical import is_digest

#: Members that name a blob at any depth; every value of a ``retained_results`` object names one
#: too. Array items are not members: they name no blob by themselves.
BLOB_MEMBERS = frozenset(
    {
        "checkpoint_digest",
        "response_digest",
        "result_digest",
        "derived_checkpoint_digest",
        "source_checkpoint_digest",
        "consumed_response_digest",
        "replaces_checkpoint_digest",
        "source_validator_report_digest",
        "executable_probe_report_digest",
        "configuration_digest",
    }
)
RETAINED_RESULTS = "retained_results"


def named_blobs(payload: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) of every place ``payload`` names a blob, in the order its canonical text
    lists them, whatever the value is."""
    if isinstance(payload, dict):
        for key, value in payload.items():
            where = f"{path}.{key}" if path else key
            if key == RETAINED_RESULTS and isinstance(value, dict):
                yield from ((f"{where}.{name}", item) for name, item in value.items())
            elif key in BLOB_MEMBERS and not isinstance(value, dict | list):
                yield where, value
            else:
                yield from named_blobs(value, where)
    elif isinstance(payload, list):
        for index, item in enumerate(payload):
            yield from named_blobs(item, f"{path}[{index}]")


def blob_references(payload: Any) -> Iterator[str]:
    """The digests a payload names as blobs, in the order its canonical text lists them."""
    return (value for _, value in named_blobs(payload) if is_digest(value))
