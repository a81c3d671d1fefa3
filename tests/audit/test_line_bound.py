"""The verifier reads a bundle a bounded line at a time (docs/formats.md, "File layout"): the
bound fits the largest record the ledger can make, and a longer line is a named break found
without reading the rest of it."""

from __future__ import annotations

import base64
import io
import json
import tracemalloc
from pathlib import Path

import pytest

from forge_audit.records import MAX_LINE_BYTES, bounded_lines
from forge_audit.verify import main as verify_main
from services.client.audit import _BundleWriter
from services.ledger.domain.journal import MAX_PAYLOAD_BYTES
from services.ledger.transactions.blobs import MAX_BLOB_BYTES
from shared.continuity.canonical import canonical_text, sha256_digest
from shared.continuity.identifiers import MAX_IDENTITY_LENGTH

DIGEST = "sha256:" + "a" * 64


def _written(kind: str, members: dict[str, object]) -> bytes:
    out = io.BytesIO()
    _BundleWriter(out).write(kind, members)
    return out.getvalue()


def test_the_bound_fits_the_largest_blob_and_entry_the_ledger_stores() -> None:
    blob = bytes(MAX_BLOB_BYTES)
    content = base64.b64encode(blob).decode("ascii")
    line = _written("blob", {"digest": sha256_digest(blob), "content": content})
    assert len(line) - 1 <= MAX_LINE_BYTES
    # the widest payload: every character a two-byte one, which the ASCII line writes as six
    widest = {"reason": "é" * ((MAX_PAYLOAD_BYTES - 16) // 2)}
    payload_json = canonical_text(widest)
    assert len(payload_json.encode()) <= MAX_PAYLOAD_BYTES
    entry = {
        "run_id": "r" * 128,
        "sequence": 2**53 - 1,
        "kind": "startup_recovery_annotation",
        "payload_json": payload_json,
        "prev_hash": DIGEST,
        "hash": DIGEST,
        "actor": "\U0001f600" * MAX_IDENTITY_LENGTH,
        "recorded_at": "2026-12-02T15:48:52.402625Z",
    }
    assert len(_written("entry", entry)) - 1 <= MAX_LINE_BYTES


def test_lines_up_to_the_bound_are_read_whole_and_a_longer_one_is_cut() -> None:
    at_bound = b"x" * MAX_LINE_BYTES + b"\n"
    stream = io.BytesIO(at_bound + b"y\n")
    assert [len(line) for line in bounded_lines(stream)] == [MAX_LINE_BYTES + 1, 2]
    over = b"x" * (MAX_LINE_BYTES + 1) + b"\nnever read\n"
    cut = list(bounded_lines(io.BytesIO(over)))
    assert [len(line) for line in cut] == [MAX_LINE_BYTES + 1]
    assert not cut[0].endswith(b"\n")


MANIFEST = (
    json.dumps(
        {
            "type": "manifest",
            "format": "forge.continuity.audit-bundle/1",
            "run_id": "run-1",
            "head": {"sequence": 0, "hash": "sha256:" + "0" * 64},
            "exported_at": "2026-12-02T15:48:52.402625Z",
        },
        separators=(",", ":"),
    ).encode()
    + b"\n"
)


@pytest.mark.parametrize("line_bytes", [MAX_LINE_BYTES + 1, 256 * 1024 * 1024])
def test_a_line_past_the_bound_is_named_without_reading_it_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line_bytes: int
) -> None:
    """The long line is a hole in a sparse file (NUL bytes, no LF): as cheap to make as to
    skip, and it would cost its whole length in memory to read."""
    bundle = tmp_path / "long.jsonl"
    with bundle.open("wb") as out:
        out.write(MANIFEST + b'{"type":"run","record":')
        out.truncate(len(MANIFEST) + line_bytes)
    tracemalloc.start()
    try:
        code = verify_main(["--json", "--trust-bundle-keys", str(bundle)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    shown = json.loads(capsys.readouterr().out)
    assert code == 1
    assert (shown["problem"], shown["first_broken_sequence"], shown["line"]) == (
        "line_too_long",
        0,
        2,
    )
    assert peak < 3 * MAX_LINE_BYTES, peak
