"""Reading lines: bytes that are no strict JSON object (N1, "Primitives": invalid UTF-8,
duplicate members, integers beyond 2^53, nesting past 128, lone surrogates, NaN, blank lines,
arrays), another strict encoding of the same values ("File layout"), and lines at and past the
24 MiB bound, which the test assembles from the parts the index lists."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from shared.continuity.canonical import sha256_digest
from vectors.cases.edits import nested_arrays, reencoded, replace_in
from vectors.drafts import Record, encode
from vectors.vector import Vector, broken, valid

if TYPE_CHECKING:
    from vectors.generate import Suite

#: docs/formats.md, "File layout": the longest line, its LF not counted.
MAX_LINE_BYTES = 24 * 1024 * 1024


def reading_lines(suite: Suite) -> None:
    s = suite.small
    suite.case(
        "valid-trailer-without-lf", s.bytes()[:-1], valid(), ["N1"],
        "the final LF (after the trailer) removed",
        "N1: the last line, the trailer, may lack its LF",
    )  # fmt: skip
    d = s.copy()
    note = "caf\u00e9 \u2713 \U0001f600"
    d.set_payload(d.entry(5), {**d.payload(d.entry(5)), "note": note})
    d.reforge()
    suite.add(Vector(
        "valid-other-json-encoding", "bundles/valid-other-json-encoding.jsonl", valid(),
        ["File layout"],
        "every line re-encoded: members in reverse order (type last), spaces after "
        "separators, raw UTF-8 for a non-ASCII payload, '/' escaped as '\\/', the member name "
        "run_id written with a \\u escape; trailer resealed over the new bytes",
        "File layout: a verifier must accept any strict JSON encoding of the same values "
        "(payload_json is a string value: its text, and so the hash, is unchanged)",
    ), b"".join(d.lines(encoder=reencoded)))  # fmt: skip

    d = s.copy()
    e3 = d.entry(3)
    at = d.index(e3)
    suite.case(
        "line-unreadable-invalid-utf8", d, broken("line_unreadable", 3, d.line(e3)), ["N1"],
        "a byte 0xFF in entry 3's line",
        f"N1: invalid UTF-8 is line_unreadable; the line is entry 3's (the entry after entry "
        f"2), so the break is named at 3, line {d.line(e3)}",
        raw=lambda lines: replace_in(lines, at, b"cmd-01", b"cmd-\xff1"),
    )  # fmt: skip
    d = s.copy()
    suite.case(
        "line-unreadable-duplicate-member", d,
        broken("line_unreadable", 3, d.line(d.entry(3))),
        ["N1", "Primitives"], "entry 3's line names the member kind twice",
        "Primitives: a member name repeated in one object is not strict JSON (N1: "
        "line_unreadable), named at entry 3",
        raw=lambda lines: replace_in(
            lines, at, b'"kind":"command_executed",',
            b'"kind":"command_executed","kind":"command_executed",',
        ),
    )  # fmt: skip
    d = s.copy()
    d.head(3)["x_count"] = 2**53
    suite.case(
        "line-unreadable-integer-beyond-2-53", d,
        broken("line_unreadable", 3, d.line(d.head(3))), ["N1", "Primitives", "N4"],
        "signed head 3's line gains a member x_count: 9007199254740992 (2^53)",
        "Primitives: a line holding an integer beyond ±(2^53−1) is line_unreadable, even in "
        "a member N4 would ignore; a signed head is named at its entry, 3",
    )  # fmt: skip
    d = s.copy()
    d.first("manifest")["x_deep"] = nested_arrays(128)
    suite.case(
        "line-unreadable-nesting-129", d, broken("line_unreadable", 0, 1),
        ["N1", "Primitives"],
        "the manifest gains a member holding 128 nested arrays (129 levels with the line's "
        "own object)",
        "Primitives: nesting beyond 128 levels (the line's object is level 1) is "
        "line_unreadable; the manifest is named at 0",
    )  # fmt: skip
    d = s.copy()
    d.first("run")["created_by"] = "LONE-SURROGATE"
    suite.case(
        "line-unreadable-lone-surrogate", d, broken("line_unreadable", 0, 2),
        ["N1", "Primitives"], "the run record's created_by is the escape \\ud800 alone",
        "Primitives: a lone surrogate escape has no UTF-8, so the line is not strict JSON; "
        "the run line is named at 0",
        raw=lambda lines: replace_in(lines, 1, b'"LONE-SURROGATE"', b'"\\ud800"'),
    )  # fmt: skip
    d = s.copy()
    first_blob = d.first("blob")
    first_blob["x_size"] = "NOT-A-NUMBER"
    blob_at = d.index(first_blob)
    suite.case(
        "line-unreadable-nan", d, broken("line_unreadable", 2, d.line(first_blob)),
        ["N1", "Primitives"],
        "the first blob record (the checkpoint entry 2 names) gains a member NaN",
        "Primitives: NaN is not JSON; the n-th blob line is named at the n-th referenced "
        "digest's first referencing sequence: the checkpoint, first named by entry 2",
        raw=lambda lines: replace_in(lines, blob_at, b'"NOT-A-NUMBER"', b"NaN"),
    )  # fmt: skip
    d = s.copy()
    suite.case(
        "line-unreadable-blank-line", d, broken("line_unreadable", 0, 2), ["N1", "N2"],
        "an empty line between the manifest and the run record",
        "File layout: no blank lines; an empty line is no JSON object (N1), read as line 2 "
        "where the run record belongs (named at 0)",
        raw=lambda lines: lines.__setitem__(0, lines[0] + b"\n"),
        where="line 2: the empty line",
    )  # fmt: skip
    d = s.copy()
    trailer_at = d.index(d.first("trailer"))
    suite.case(
        "line-unreadable-array", d, broken("line_unreadable", 0, d.line(d.first("trailer"))),
        ["N1"], "the trailer line replaced by a JSON array",
        "N1: a line that is not a JSON object is line_unreadable; in the trailer's place it "
        "is named at 0",
        raw=lambda lines: lines.__setitem__(trailer_at, b'["trailer"]\n'),
        seal=False,
        where=f"line {d.line(d.first('trailer'))}: the array, where the trailer belongs",
    )  # fmt: skip


def long_lines(suite: Suite) -> None:
    """Lines at and past the 24 MiB bound, written by the test from the parts the index
    lists (a committed 24 MiB file would be absurd)."""
    s = suite.small
    d = s.copy()
    big_record: Record = {"type": "blob", "digest": "", "x_pad": "", "content": ""}
    # the line's fixed part, then as many "AAAA" groups (3 zero bytes each) as fit exactly
    fixed = len(encode({**big_record, "digest": "sha256:" + "0" * 64})) - 1
    pad = (MAX_LINE_BYTES - fixed) % 4
    big_record["x_pad"] = "z" * pad
    zeros_groups = (MAX_LINE_BYTES - fixed - pad) // 4
    digest = sha256_digest(bytes(3 * zeros_groups))
    big_record["digest"] = digest
    d.set_payload(d.entry(5), {**d.payload(d.entry(5)), "result_digest": digest})
    d.insert_before(d.first("trailer"), big_record)
    d.reforge()
    lines = [encode(record) for record in d.records]
    at = d.index(big_record)
    head, tail = lines[at].split(b'"content":""')
    head += b'"content":"'
    tail = b'"' + tail
    # one byte more than the bound: the line cut there, the bundle with it
    too_long = MAX_LINE_BYTES + 1 - len(head)
    assert len(head) + 4 * zeros_groups + len(tail) - 1 == MAX_LINE_BYTES
    before = b"".join(lines[:at])
    hasher = hashlib.sha256(before + head)
    chunk = b"A" * (4 * 1024 * 1024)
    remaining = 4 * zeros_groups
    while remaining:
        hasher.update(chunk[: min(remaining, len(chunk))])
        remaining -= min(remaining, len(chunk))
    hasher.update(tail)
    trailer = d.first("trailer")
    trailer["counts"] = d.counts()
    trailer["bundle_digest"] = "sha256:" + hasher.hexdigest()
    suite.files["bundles/blob-line-at-bound.head"] = before + head
    suite.files["bundles/blob-line-at-bound.tail"] = tail + encode(trailer)
    line = at + 1
    suite.add(Vector(
        "valid-blob-line-at-bound", "blob-line-at-bound.jsonl", valid(), ["File layout"],
        f"entry 5 also names a blob of {3 * zeros_groups} zero bytes, whose record line is "
        f"exactly {MAX_LINE_BYTES} bytes before its LF (made by the test from the parts)",
        "a line is at most 24 MiB, its LF not counted: this one is read",
        generate=[{"file": "bundles/blob-line-at-bound.head"},
                  {"repeat": "A", "count": 4 * zeros_groups},
                  {"file": "bundles/blob-line-at-bound.tail"}],
    ))  # fmt: skip
    suite.add(Vector(
        "line-too-long-blob-line", "blob-line-too-long.jsonl",
        broken("line_too_long", 5, line), ["File layout", "N2"],
        f"the same bundle with one more byte in that line ({MAX_LINE_BYTES + 1} bytes "
        "before its LF); the bundle ends there",
        "a longer line is line_too_long, named without reading the rest of it; the n-th "
        "blob line is named at the n-th referenced digest's first sequence, 5",
        where=f"line {line}: the blob record of the zero bytes, cut past the bound",
        generate=[{"file": "bundles/blob-line-at-bound.head"},
                  {"repeat": "A", "count": too_long}],
    ))  # fmt: skip
    manifest = s.bytes().splitlines(keepends=True)[0]
    start = b'{"type":"run","record":'
    suite.files["bundles/run-line-too-long.head"] = manifest + start
    suite.add(Vector(
        "line-too-long-run-line", "run-line-too-long.jsonl",
        broken("line_too_long", 0, 2), ["File layout", "N2"],
        "the real small run's manifest, then a run line of 25,165,825 bytes (NUL bytes "
        "after its start) with no LF",
        "line_too_long on line 2; a run line is named at 0",
        where="line 2: the run record, cut past the bound",
        generate=[{"file": "bundles/run-line-too-long.head"},
                  {"repeat": "\u0000", "count": MAX_LINE_BYTES + 1 - len(start)}],
    ))  # fmt: skip
