"""``forge-continuity-verify BUNDLE``: check an audit bundle offline, with nothing of the services
running and none of their code (docs/formats.md, "Audit bundle"; ADR 0015 for the trust model).

Exit status: 0 the bundle verifies; 1 it is broken (the first break is named by its sequence);
2 usage error or an unreadable file, and a verification with no trusted key: the keys a bundle
carries prove nothing about who wrote it, so trusting them takes ``--trust-bundle-keys``.

    forge-continuity signing-keys export --out keys.json       # pinned once, out of band
    forge-continuity heads watch --out heads.jsonl             # a monitor's memory
    forge-continuity-verify --trusted-key keys.json --known-heads heads.jsonl run-1.audit.jsonl
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from forge_audit import SIGNING_KEYS_FORMAT
from forge_audit.checks import BundleVerifier, Report, TrustedKey, key_id
from forge_audit.heads import Trust, is_timestamp, read_signed_head
from forge_audit.jcs import JsonRefused, parse
from forge_audit.records import Broken, Record, bounded_lines, overlong

EXIT_VERIFIED = 0
EXIT_BROKEN = 1
EXIT_USAGE = 2
# A manifest line is short; the run id is read from at most this many bytes of it.
MAX_MANIFEST_BYTES = 64 * 1024


class KeyFileError(ValueError):
    """A --trusted-key file that holds no Ed25519 public key."""


class KnownHeadsError(ValueError):
    """A --known-heads file that cannot be read, or holds a head no trusted key signed."""


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


def load_trusted_keys(path: Path) -> dict[str, TrustedKey]:
    """The keys of one --trusted-key file: a signing-keys file (``forge-continuity signing-keys
    export``: every published key with its window), a PEM public key or base64 raw bytes."""
    data = path.read_bytes()
    if not data.lstrip().startswith(b"{"):
        found, key = load_public_key(path)
        return {found: TrustedKey(key)}
    try:
        document = parse(data.decode("utf-8"))
        if not isinstance(document, dict) or document.get("format") != SIGNING_KEYS_FORMAT:
            raise KeyFileError(f"{path}: not a {SIGNING_KEYS_FORMAT} file")
        keys = document.get("keys")
        if not isinstance(keys, list):
            raise KeyFileError(f"{path}: keys must be a list")
        return dict(_trusted_key(path, item) for item in keys)
    except (UnicodeDecodeError, JsonRefused) as error:
        raise KeyFileError(f"{path}: {error}") from None


def _trusted_key(path: Path, item: object) -> tuple[str, TrustedKey]:
    if not isinstance(item, dict) or item.get("algorithm") != "ed25519":
        raise KeyFileError(f"{path}: only ed25519 keys are known")
    try:
        raw = base64.b64decode(str(item.get("public_key")), validate=True)
        key = Ed25519PublicKey.from_public_bytes(raw)
    except (ValueError, binascii.Error) as error:
        raise KeyFileError(f"{path}: {error}") from None
    if key_id(raw) != item.get("key_id"):
        raise KeyFileError(f"{path}: {item.get('key_id')} is not its key's digest")
    bounds = [item.get("not_before"), item.get("not_after")]
    if not all(bound is None or is_timestamp(bound) for bound in bounds):
        raise KeyFileError(f"{path}: not_before and not_after are timestamps or null")
    return key_id(raw), TrustedKey(key, *bounds)


def bundle_run_id(path: Path) -> str:
    """The run a bundle is about, from its manifest (its first line)."""
    with path.open("rb") as bundle:
        first = bundle.readline(MAX_MANIFEST_BYTES)
    try:
        manifest = parse(first.decode("utf-8"))
    except (UnicodeDecodeError, JsonRefused):
        return ""
    run_id = manifest.get("run_id") if isinstance(manifest, dict) else None
    return run_id if isinstance(run_id, str) else ""


def load_witnessed(path: Path, run_id: str, trust: Trust | None) -> dict[int, str]:
    """Sequence -> head hash of every head of ``run_id`` in a heads file (docs/formats.md,
    "Heads file"), each checked against the pinned keys when there are some."""
    witnessed: dict[int, str] = {}
    with path.open("rb") as heads:
        for number, raw in enumerate(bounded_lines(heads), start=1):
            if overlong(raw):
                raise KnownHeadsError(f"{path} line {number}: longer than a signed head can be")
            try:
                members = parse(raw.decode("utf-8"))
            except (UnicodeDecodeError, JsonRefused) as error:
                raise KnownHeadsError(f"{path} line {number}: {error}") from None
            if not isinstance(members, dict) or members.get("type") != "signed_head":
                raise KnownHeadsError(f"{path} line {number}: not a signed_head record")
            if members.get("run_id") != run_id:
                continue
            record = Record(members, number, 0)
            try:
                head = read_signed_head(record)
                if trust is not None:
                    trust.check(head, record)
            except Broken as broken:
                detail = f"{broken.problem}: {broken.detail}"
                raise KnownHeadsError(f"{path} line {number}: {detail}") from None
            if witnessed.setdefault(head.sequence, head.head_hash) != head.head_hash:
                raise KnownHeadsError(
                    f"{path} line {number}: two signed heads at {head.sequence} disagree: the "
                    "ledger forked while it was watched"
                )
    return witnessed


def verify_lines(
    lines: Iterable[bytes],
    trusted: Mapping[str, TrustedKey | Ed25519PublicKey] | None = None,
    *,
    trust_bundle_keys: bool = False,
    require_blobs: bool = False,
    allow_unsigned_head: bool = False,
    witnessed: dict[int, str] | None = None,
) -> Report:
    """Check a bundle's lines (each with its LF) in order; :class:`Broken` names the first
    break."""
    verifier = BundleVerifier(
        trusted,
        trust_bundle_keys=trust_bundle_keys,
        require_blobs=require_blobs,
        allow_unsigned_head=allow_unsigned_head,
        witnessed=witnessed,
    )
    for raw in lines:
        verifier.line(raw)
    return verifier.finish()


def verify_file(
    path: Path,
    trusted: Mapping[str, TrustedKey | Ed25519PublicKey] | None = None,
    *,
    trust_bundle_keys: bool = False,
    require_blobs: bool = False,
    allow_unsigned_head: bool = False,
    known_heads: Path | None = None,
) -> Report:
    """Read the bundle line by line (one line, of at most MAX_LINE_BYTES, in memory at a
    time)."""
    witnessed = None
    if known_heads is not None:
        # With pinned keys every witnessed head must verify under them (a heads file that was
        # tampered with convicts nothing); with only the bundle's keys trusted, the heads file
        # is the auditor's own memory and is taken as it is.
        pinned = {
            found: key if isinstance(key, TrustedKey) else TrustedKey(key)
            for found, key in (trusted or {}).items()
        }
        witnessed = load_witnessed(
            known_heads, bundle_run_id(path), Trust(pinned) if pinned else None
        )
    with path.open("rb") as bundle:
        return verify_lines(
            bounded_lines(bundle),
            trusted,
            trust_bundle_keys=trust_bundle_keys,
            require_blobs=require_blobs,
            allow_unsigned_head=allow_unsigned_head,
            witnessed=witnessed,
        )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="forge-continuity-verify",
        description="Verify a Forge continuity audit bundle offline.",
        epilog="Exit status: 0 verified, 1 broken (first broken sequence named), 2 usage error "
        "(including no trusted key and no --trust-bundle-keys).",
    )
    parser.add_argument("bundle", type=Path, metavar="BUNDLE")
    parser.add_argument(
        "--trusted-key",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="keys obtained out of band: a signing-keys file (forge-continuity signing-keys "
        "export; each key with its validity window), a PEM public key, or base64 of the raw 32 "
        "bytes; every head must be signed by one of them (repeatable)",
    )
    parser.add_argument(
        "--trust-bundle-keys",
        action="store_true",
        help="without --trusted-key, trust the keys the bundle itself carries: this checks "
        "internal consistency only (a rewritten bundle re-signed with another key passes)",
    )
    parser.add_argument(
        "--known-heads",
        type=Path,
        metavar="HEADS",
        help="a heads file a monitor kept (forge-continuity heads watch): the bundle must extend "
        "every head witnessed for its run (shorter: rollback; different: fork)",
    )
    parser.add_argument(
        "--require-blobs",
        action="store_true",
        help="a referenced blob the ledger did not store is a break (default: reported)",
    )
    parser.add_argument(
        "--allow-unsigned-head",
        action="store_true",
        help="accept heads no trusted key signed (history written before signing); each is "
        "counted in the report, and a rewrite of them is then undetectable",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser


def _report_lines(report: Report) -> list[str]:
    trust = (
        "ONLY INTERNAL CONSISTENCY: the keys the bundle itself carries (--trust-bundle-keys); "
        "pass --trusted-key to pin the ledger's keys"
        if report.trusted_from_bundle
        else "every signed head by keys given with --trusted-key"
    )
    lines = [
        f"VERIFIED  run {report.run_id}",
        f"  entries        {report.entries} (head {report.head_sequence} {report.head_hash})",
        f"  signed heads   {report.signed_heads}; head signed by {report.head_key_id or 'nobody'}",
        f"  trusted        {trust}",
        f"  witnessed      {report.witnessed_heads} heads a monitor saw, all extended",
        f"  blobs          {report.blobs} intact, {len(report.blobs_absent)} not stored",
        f"  policies       {report.policies}",
        f"  admissions     {report.admissions}",
        f"  commands       {report.commands}",
    ]
    if report.unsigned_heads_accepted:
        lines.append(
            f"  UNSIGNED       {report.unsigned_heads_accepted} heads accepted without a "
            "signature (--allow-unsigned-head)"
        )
    lines += [f"  not stored     {digest}" for digest in report.blobs_absent]
    return lines


def _emit(out: TextIO, as_json: bool, document: dict[str, object], lines: list[str]) -> None:
    out.write(json.dumps(document, indent=2) + "\n" if as_json else "\n".join(lines) + "\n")


_NO_TRUST = (
    "no trusted key: pass --trusted-key KEYS (fetched out of band, e.g. forge-continuity "
    "signing-keys export --out KEYS), or --trust-bundle-keys to check internal consistency only\n"
)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out = sys.stdout
    if not args.trusted_key and not args.trust_bundle_keys:
        sys.stderr.write(f"forge-continuity-verify: {_NO_TRUST}")
        return EXIT_USAGE
    try:
        trusted: dict[str, TrustedKey] = {}
        for path in args.trusted_key:
            trusted.update(load_trusted_keys(path))
        report = verify_file(
            args.bundle,
            trusted,
            trust_bundle_keys=args.trust_bundle_keys,
            require_blobs=args.require_blobs,
            allow_unsigned_head=args.allow_unsigned_head,
            known_heads=args.known_heads,
        )
    except (OSError, KeyFileError, KnownHeadsError) as error:
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
