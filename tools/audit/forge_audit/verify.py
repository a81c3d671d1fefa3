"""``forge-continuity-verify BUNDLE``: check an audit bundle offline, with nothing of the services
running and none of their code (docs/formats.md, "Audit bundle"; ADR 0015 for the trust model).

Exit status: 0 the bundle verifies; 1 it is broken (the first break is named by its sequence);
2 usage error or an unreadable file.

    forge-continuity-verify run-1.audit.jsonl
    forge-continuity-verify --trusted-key ledger-signing.pub.pem run-1.audit.jsonl
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TextIO

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from forge_audit.checks import BundleVerifier, Report, key_id
from forge_audit.records import Broken, bounded_lines

EXIT_VERIFIED = 0
EXIT_BROKEN = 1
EXIT_USAGE = 2


class KeyFileError(ValueError):
    """A --trusted-key file that holds no Ed25519 public key."""


def load_public_key(path: Path) -> tuple[str, Ed25519PublicKey]:
    """(key id, key) of a PEM ``PUBLIC KEY`` or of a file holding the base64 of its 32 raw bytes
    (``public_key`` as ``GetSigningKeys`` returns it)."""
    data = path.read_bytes()
    try:
        if b"-----BEGIN" in data:
            key = serialization.load_pem_public_key(data)
            if not isinstance(key, Ed25519PublicKey):
                raise KeyFileError(f"{path}: not an Ed25519 public key")
        else:
            key = Ed25519PublicKey.from_public_bytes(base64.b64decode(data.strip(), validate=True))
    except (ValueError, binascii.Error) as error:
        raise KeyFileError(f"{path}: {error}") from None
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return key_id(raw), key


def verify_lines(
    lines: Iterable[bytes],
    trusted: dict[str, Ed25519PublicKey] | None = None,
    *,
    require_blobs: bool = False,
    allow_unsigned_head: bool = False,
) -> Report:
    """Check a bundle's lines (each with its LF) in order; :class:`Broken` names the first
    break."""
    verifier = BundleVerifier(
        trusted, require_blobs=require_blobs, allow_unsigned_head=allow_unsigned_head
    )
    for raw in lines:
        verifier.line(raw)
    return verifier.finish()


def verify_file(
    path: Path,
    trusted: dict[str, Ed25519PublicKey] | None = None,
    *,
    require_blobs: bool = False,
    allow_unsigned_head: bool = False,
) -> Report:
    """Read the bundle line by line (one line, of at most MAX_LINE_BYTES, in memory at a time)."""
    with path.open("rb") as bundle:
        return verify_lines(
            bounded_lines(bundle),
            trusted,
            require_blobs=require_blobs,
            allow_unsigned_head=allow_unsigned_head,
        )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="forge-continuity-verify",
        description="Verify a Forge continuity audit bundle offline.",
        epilog="Exit status: 0 verified, 1 broken (first broken sequence named), 2 usage error.",
    )
    parser.add_argument("bundle", type=Path, metavar="BUNDLE")
    parser.add_argument(
        "--trusted-key",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="an Ed25519 public key obtained out of band (PEM, or base64 of the raw 32 bytes); "
        "when given, the head must be signed by one of these keys, not merely by a key the "
        "bundle itself publishes (repeatable)",
    )
    parser.add_argument(
        "--require-blobs",
        action="store_true",
        help="a referenced blob the ledger did not store is a break (default: reported)",
    )
    parser.add_argument(
        "--allow-unsigned-head",
        action="store_true",
        help="accept a head no trusted key signed (a rewrite from genesis is then undetectable)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser


def _report_lines(report: Report) -> list[str]:
    trust = (
        "keys published in the bundle (pass --trusted-key to pin the ledger's key)"
        if report.trusted_from_bundle
        else "keys given with --trusted-key"
    )
    lines = [
        f"VERIFIED  run {report.run_id}",
        f"  entries        {report.entries} (head {report.head_sequence} {report.head_hash})",
        f"  signed heads   {report.signed_heads}; head signed by {report.head_key_id or 'nobody'}",
        f"  trusted        {trust}",
        f"  blobs          {report.blobs} intact, {len(report.blobs_absent)} not stored",
        f"  policies       {report.policies}",
        f"  admissions     {report.admissions}",
        f"  commands       {report.commands}",
    ]
    lines += [f"  not stored     {digest}" for digest in report.blobs_absent]
    return lines


def _emit(out: TextIO, as_json: bool, document: dict[str, object], lines: list[str]) -> None:
    out.write(json.dumps(document, indent=2) + "\n" if as_json else "\n".join(lines) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out = sys.stdout
    try:
        trusted = dict(load_public_key(path) for path in args.trusted_key)
        report = verify_file(
            args.bundle,
            trusted,
            require_blobs=args.require_blobs,
            allow_unsigned_head=args.allow_unsigned_head,
        )
    except (OSError, KeyFileError) as error:
        sys.stderr.write(f"forge-continuity-verify: {error}\n")
        return EXIT_USAGE
    except Broken as broken:
        document: dict[str, object] = {
            "valid": False,
            "first_broken_sequence": broken.sequence,
            "problem": broken.problem,
            "detail": broken.detail,
            "line": broken.line,
        }
        text = f"BROKEN at sequence {broken.sequence}: {broken.problem}: {broken.detail}"
        _emit(out, args.json, document, [f"{text} (bundle line {broken.line})"])
        return EXIT_BROKEN
    document = {"valid": True, **vars(report)}
    _emit(out, args.json, document, _report_lines(report))
    return EXIT_VERIFIED


if __name__ == "__main__":
    raise SystemExit(main())
