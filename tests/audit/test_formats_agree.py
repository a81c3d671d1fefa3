"""Formats that cannot be made to disagree (issue 43): the ledger, the export and the offline
verifier read the same bytes the same way. A value one of them takes for a digest, an integer or
a nesting the others refuse would let one append break every later bundle of its run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from forge_audit import records as verifier_records
from forge_audit.jcs import digest_of
from forge_audit.records import Broken
from forge_audit.verify import verify_lines
from shared.continuity import blob_references as shared_blobs
from shared.continuity.blob_references import blob_references as exported_blobs  # the export's

DIGEST = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64

# Payloads naming near-digests where a blob is named: none of them names a blob.
PAYLOADS: list[dict[str, Any]] = [
    {"checkpoint_digest": DIGEST + "\n"},
    {"checkpoint_digest": DIGEST + "\r\n"},
    {"checkpoint_digest": " " + DIGEST},
    {"retained_results": {"c1": DIGEST + "\n", "c2": OTHER}},
    {"outer": {"response_digest": DIGEST + "\n"}, "result_digest": OTHER},
    {"items": [{"checkpoint_digest": DIGEST}, DIGEST]},
    {"checkpoint_digest": DIGEST.upper()},
    {"checkpoint_digest": 7, "response_digest": None, "retained_results": {"c1": False}},
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_the_export_and_the_verifier_name_the_same_blobs(payload: dict[str, Any]) -> None:
    exported = list(exported_blobs(payload))
    assert exported == verifier_records.blob_references(payload)
    assert all(digest in (DIGEST, OTHER) for digest in exported)


def test_the_verifier_keeps_the_same_list_of_blob_members() -> None:
    assert verifier_records.BLOB_MEMBERS == shared_blobs.BLOB_MEMBERS
    assert verifier_records.RETAINED_RESULTS == shared_blobs.RETAINED_RESULTS


def _broken(lines: list[bytes]) -> Broken:
    with pytest.raises(Broken) as raised:
        verify_lines(lines)
    return raised.value


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


MANIFEST = _line(
    {
        "type": "manifest",
        "format": "forge.continuity.audit-bundle/1",
        "run_id": "run-1",
        "head": {"sequence": 0, "hash": "sha256:" + "0" * 64},
        "exported_at": "2026-12-02T15:48:52.402625Z",
    }
)


def test_the_verifier_refuses_a_digest_with_a_trailing_newline_where_it_reads_one() -> None:
    record = dict.fromkeys(verifier_records.RUN_MEMBERS, "x")
    run = {
        "type": "run",
        "record": record,
        "run_digest": digest_of(record) + "\n",
        "created_by": "writer",
        "created_at": "2026-12-02T15:48:52.402625Z",
    }
    found = _broken([MANIFEST, _line(run)])
    assert (found.problem, found.line) == ("record_invalid", 2)
    run["run_digest"] = digest_of(record)  # the same digest without it: the record is read
    found = _broken([MANIFEST, _line(run)])
    assert (found.problem, found.line) == ("run_mismatch", 2)
