"""Blob records: omitted, out of order, unexpected, mismatched or unreadable blobs,
``--require-blobs``, and the N18 walk of a payload's blob references in one vector."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from shared.continuity.canonical import sha256_digest
from vectors.vector import Vector, broken, valid

if TYPE_CHECKING:
    from vectors.generate import Suite


def blobs(suite: Suite) -> None:
    s = suite.small
    checkpoint, response = s.all("blob")
    d = s.copy()
    d.remove(d.blob(checkpoint["digest"]))
    suite.case(
        "blob-omitted", d, broken("blob_omitted", 2, d.line(d.blob(response["digest"]))),
        ["table"], "the checkpoint's blob record removed",
        "the second blob line should be the second referenced digest (the checkpoint, first "
        "named by entry 2): blob_omitted named at 2, on the line that holds another digest",
    )  # fmt: skip
    d = s.copy()
    first, second = d.blob(checkpoint["digest"]), d.blob(response["digest"])
    i, j = d.index(first), d.index(second)
    d.records[i], d.records[j] = second, first
    suite.case(
        "blob-omitted-out-of-order", d, broken("blob_omitted", 2, d.line(second)),
        ["table", "File layout"], "the two blob records swapped",
        "blobs come in order of first reference: the line where the checkpoint belongs "
        "holds the response: blob_omitted at 2",
    )  # fmt: skip
    d = s.copy()
    d.remove(d.blob(response["digest"]))
    suite.case(
        "blob-omitted-last", d, broken("blob_omitted", 5, d.line(d.first("trailer"))),
        ["table", "N2"], "the last blob record removed",
        "the response, first named by entry 5, has no record: found at the end of the blob "
        "section (N2: the trailer's line)",
    )  # fmt: skip
    d = s.copy()
    content = b"a blob no entry names"
    extra = d.insert_before(d.first("trailer"), {
        "type": "blob", "digest": sha256_digest(content),
        "content": base64.b64encode(content).decode(),
    })  # fmt: skip
    suite.case(
        "blob-unexpected", d, broken("blob_unexpected", 0, d.line(extra)), ["table"],
        "a blob record no entry references, after the others",
        "more blob records than referenced digests: the extra record is about no reference, "
        "so no entry: named at 0",
    )  # fmt: skip
    d = s.copy()
    blob = d.blob(checkpoint["digest"])
    blob["content"] = base64.b64encode(b"other bytes").decode()
    suite.case(
        "blob-mismatch", d, broken("blob_mismatch", 2, d.line(blob)), ["table"],
        "the checkpoint blob's content replaced",
        "a blob's content must hash to its digest: named at its first referencing sequence",
    )  # fmt: skip
    d = s.copy()
    blob = d.blob(checkpoint["digest"])
    blob["content"] = "not base64!"
    suite.case(
        "record-invalid-blob-content", d, broken("record_invalid", 2, d.line(blob)), ["N5"],
        "the checkpoint blob's content is not base64",
        "N5: base64 members are strict RFC 4648; a blob line is named at its digest's first "
        "referencing sequence",
    )  # fmt: skip
    suite.add(Vector(
        "blob-missing-required", "bundles/real-small.jsonl",
        broken("blob_missing", 1, s.line(s.first("blob_absent"))), ["table"],
        "the real small run with --require-blobs",
        "blob_absent is a break with --require-blobs: the configuration, first named by "
        "entry 1",
        require_blobs=True,
    ))  # fmt: skip
    blob_walk(suite)


def blob_walk(suite: Suite) -> None:
    """N18 in one payload: member order, arrays, retained_results, values that are no
    digest, and UTF-16 order."""
    s = suite.small
    d = s.copy()
    e5 = d.entry(5)
    contents = {name: f"blob {name}".encode() for name in "ABCDEPQX"}
    digest = {name: sha256_digest(content) for name, content in contents.items()}
    direct = sha256_digest(b"a digest directly in an array")
    checkpoint = d.payload(d.entry(2))["checkpoint_digest"]
    response = d.payload(e5)["response_digest"]
    payload = {
        "request_id": "model-request-1",
        "response_digest": response,
        "a_list": [direct, {"result_digest": digest["A"]}],
        "checkpoint_digest": checkpoint,
        "deeper": {"retained_results": [{"result_digest": digest["E"]}], "response_digest": 17},
        "retained_results": {
            "r2": digest["B"], "r1": digest["C"], "nested": {"checkpoint_digest": digest["X"]},
            "text": "not a digest",
        },
        "source_checkpoint_digest": "sha256:" + "A" * 64,
        "utf16": {"\ue000": {"result_digest": digest["P"]},
                  "\U0001f600": {"result_digest": digest["Q"]}},
    }  # fmt: skip
    d.set_payload(e5, payload)
    # N18, in canonical member order: a_list (its object's result_digest: A; the digest
    # directly in the array names nothing), checkpoint_digest (already named by entry 2),
    # deeper (retained_results is an array, walked: E; response_digest 17 names nothing),
    # response_digest, retained_results (r1: C, r2: B, nothing inside nested, text no
    # digest), source_checkpoint_digest (upper-case hex: no digest), utf16 (U+1F600 sorts
    # before U+E000 in UTF-16 code units: Q, then P).
    order = [digest["A"], digest["E"], response, digest["C"], digest["B"], digest["Q"],
             digest["P"]]  # fmt: skip
    by_digest = {v: contents[k] for k, v in digest.items()}
    by_digest[response] = base64.b64decode(d.blob(response)["content"])
    d.remove(d.blob(response))
    anchor = d.first("trailer")
    for named in order:
        d.insert_before(anchor, {
            "type": "blob", "digest": named,
            "content": base64.b64encode(by_digest[named]).decode(),
        })  # fmt: skip
    d.reforge()
    suite.case(
        "valid-blob-reference-walk", d, valid(), ["N18"],
        "entry 5's payload names blobs in every way N18 distinguishes; blob records for "
        "exactly the digests N18 collects, in its order",
        "N18: members in canonical (UTF-16) order, depth first; an object's blob-list "
        "members and retained_results' direct digest values name blobs; array items are "
        "walked but a digest directly in an array names nothing; a non-object "
        "retained_results is walked; non-digest values name nothing; each digest once",
    )  # fmt: skip
    d = d.copy()
    d.insert_before(d.first("trailer"), {
        "type": "blob", "digest": direct,
        "content": base64.b64encode(b"a digest directly in an array").decode(),
    })  # fmt: skip
    extra = d.all("blob")[-1]
    suite.case(
        "blob-unexpected-digest-in-array", d,
        broken("blob_unexpected", 0, d.line(extra)), ["N18"],
        "the previous vector with a blob record for the digest that stands directly in an "
        "array, after the others",
        "N18: an array item is not a member, so that digest names no blob: the record is "
        "unexpected (named at 0)",
    )  # fmt: skip
