"""Formats that cannot be made to disagree (issue 43): the ledger, the export and the offline
verifier read the same bytes the same way. A value one of them takes for a digest, an integer or
a nesting the others refuse would let one append break every later bundle of its run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from forge_audit import jcs
from forge_audit import records as verifier_records
from forge_audit.jcs import digest_of
from forge_audit.records import Broken
from forge_audit.verify import main as verify_main
from forge_audit.verify import verify_lines
from services.ledger.domain.journal import EntryKind, validate_payload
from shared.continuity import blob_references as shared_blobs
from shared.continuity.blob_references import blob_references as exported_blobs  # the export's
from shared.continuity.canonical import MAX_JSON_DEPTH
from shared.runtime.errors import InvalidArgument

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


# --- numbers and nesting: the ledger and the verifier accept the same payloads ------------------


def _nested(depth: int) -> str:
    return '{"n":' + "[" * depth + "]" * depth + ',"reason":"x"}'


CANONICAL_PAYLOADS = [
    '{"n":9007199254740991,"reason":"x"}',
    '{"n":-9007199254740991,"reason":"x"}',
    '{"n":9007199254740992,"reason":"x"}',
    '{"n":18446744073709551616,"reason":"x"}',
    '{"n":' + "9" * 5_000 + ',"reason":"x"}',
    '{"n":-' + "9" * 5_000 + ',"reason":"x"}',
    _nested(MAX_JSON_DEPTH - 1),  # the payload object itself is one level
    _nested(MAX_JSON_DEPTH),
    _nested(900),
    _nested(100_000),
    '{"reason":"\\ud800"}',
    '{"reason":"\U0001f600"}',
]


def _ledger_accepts(payload_json: str) -> bool:
    try:
        return validate_payload(EntryKind.RUN_HELD, payload_json) == payload_json
    except InvalidArgument as refused:
        assert refused.reason == "JOURNAL_PAYLOAD_INVALID"
        return False


def _verifier_accepts(payload_json: str) -> bool:
    line = _line({"type": "entry", "payload_json": payload_json})
    try:
        payload = jcs.parse(jcs.parse(line.decode())["payload_json"])
        return jcs.canonical(payload).decode() == payload_json
    except jcs.JsonRefused:
        return False


@pytest.mark.parametrize("payload_json", CANONICAL_PAYLOADS, ids=lambda text: text[:24])
def test_the_ledger_and_the_verifier_accept_the_same_payloads(payload_json: str) -> None:
    assert _ledger_accepts(payload_json) == _verifier_accepts(payload_json)


def test_both_parsers_have_the_same_depth_limit() -> None:
    assert jcs.MAX_DEPTH == MAX_JSON_DEPTH
    assert _ledger_accepts(_nested(MAX_JSON_DEPTH - 1))
    assert not _ledger_accepts(_nested(MAX_JSON_DEPTH))


def _bundle(tmp_path: Path, *lines: bytes) -> Path:
    record: dict[str, Any] = dict.fromkeys(verifier_records.RUN_MEMBERS, "x")
    record.update(run_id="run-1", command_limit=3, active_deadline=None)
    run = {
        "type": "run",
        "record": record,
        "run_digest": digest_of(record),
        "created_by": "writer",
        "created_at": "2026-12-02T15:48:52.402625Z",
    }
    path = tmp_path / "bundle.jsonl"
    manifest = json.loads(MANIFEST)
    manifest["head"]["sequence"] = 1
    path.write_bytes(
        b"".join([_line(manifest), _line(run), _line({"type": "signing_keys", "keys": []}), *lines])
    )
    return path


def _entry(payload_json: str) -> bytes:
    return _line(
        {
            "type": "entry",
            "run_id": "run-1",
            "sequence": 1,
            "kind": "run_held",
            "payload_json": payload_json,
            "prev_hash": "sha256:" + "0" * 64,
            "hash": DIGEST,
            "actor": "writer",
            "recorded_at": "2026-12-02T15:48:52.402625Z",
        }
    )


@pytest.mark.parametrize(
    ("line", "problem", "sequence"),
    [
        (_entry(CANONICAL_PAYLOADS[4]), "payload_not_canonical", 1),
        (_entry(_nested(MAX_JSON_DEPTH)), "payload_not_canonical", 1),
        (_entry(_nested(100_000)), "payload_not_canonical", 1),
        (b'{"type":"entry","sequence":' + b"9" * 5_000 + b"}\n", "line_unreadable", 1),
        (b'{"type":"entry","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", "line_unreadable", 1),
    ],
    ids=[
        "long-integer",
        "deep-payload",
        "deeper-payload",
        "long-integer-line",
        "deep-line",
    ],
)
def test_the_verifier_names_the_line_of_a_number_or_nesting_it_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: bytes, problem: str, sequence: int
) -> None:
    bundle = _bundle(tmp_path, line)
    assert verify_main(["--json", "--trust-bundle-keys", str(bundle)]) == 1
    shown = json.loads(capsys.readouterr().out)
    assert (shown["problem"], shown["first_broken_sequence"], shown["line"]) == (
        problem,
        sequence,
        4,
    )


def test_a_lone_surrogate_is_unreadable_where_the_verifier_would_digest_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A string no UTF-8 can hold has no canonical bytes: refused as the line is read, not as
    the run record is digested (which raised out of the verifier)."""
    bundle = _bundle(tmp_path)
    lines = bundle.read_bytes().splitlines(keepends=True)
    assert b'"task_id":"x"' in lines[1]
    lines[1] = lines[1].replace(b'"task_id":"x"', b'"task_id":"\\ud800"')
    bundle.write_bytes(b"".join(lines))
    assert verify_main(["--json", "--trust-bundle-keys", str(bundle)]) == 1
    shown = json.loads(capsys.readouterr().out)
    assert (shown["problem"], shown["line"]) == ("line_unreadable", 2)
