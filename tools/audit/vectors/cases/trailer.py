"""The trailer: its counts and bundle digest (resealed after the edit), counts it does not
define (N4), and a bundle without one (N2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from shared.continuity.canonical import sha256_digest
from vectors.drafts import Record, encode
from vectors.vector import broken

if TYPE_CHECKING:
    from vectors.generate import Suite


def trailer(suite: Suite) -> None:
    s = suite.small
    trailer_line = s.line(s.first("trailer"))

    def sealed_then(change: Callable[[Record], None]) -> bytes:
        d = s.copy()
        lines = d.lines()
        trailer = d.first("trailer")
        change(trailer)
        lines[-1] = encode(trailer)
        return b"".join(lines)

    where = f"line {trailer_line}: the trailer record"
    suite.case(
        "trailer-mismatch-counts", sealed_then(lambda t: t["counts"].update(entries=6)),
        broken("trailer_mismatch", 0, trailer_line), ["table"],
        "the trailer counts 6 entries", "the counts must match what the bundle holds",
        where=where,
    )  # fmt: skip
    suite.case(
        "trailer-mismatch-digest",
        sealed_then(lambda t: t.update(bundle_digest=sha256_digest(b""))),
        broken("trailer_mismatch", 0, trailer_line), ["table"],
        "the trailer's bundle_digest is the digest of nothing",
        "bundle_digest is SHA-256 of every byte before the trailer line",
        where=where,
    )  # fmt: skip
    suite.case(
        "trailer-mismatch-extra-count",
        sealed_then(lambda t: t["counts"].update(x_later=0)),
        broken("trailer_mismatch", 0, trailer_line), ["N4", "table"],
        "the trailer's counts gain a seventh member",
        "N4: counts holds exactly the six listed counts, so these counts do not match",
        where=where,
    )  # fmt: skip
    d = s.copy()
    d.remove(d.first("trailer"))
    suite.case(
        "trailer-missing", d, broken("trailer_missing", 0, len(d.records)), ["N2"],
        "the trailer removed", "N2: trailer_missing is named on the last line read",
    )  # fmt: skip
    suite.case(
        "trailer-missing-empty-file", b"", broken("trailer_missing", 0, 0), ["N2"],
        "an empty file", "N2: 0 for an empty file", where="no line was read",
    )  # fmt: skip
