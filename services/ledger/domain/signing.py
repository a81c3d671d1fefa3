"""Signed journal heads: the ledger's Ed25519 signature over the head each committing append makes
(ADR 0015, docs/formats.md "Signed head").

A ``forge.continuity.signed-head/2`` signature covers the canonical statement ``{format, run_id,
sequence, head_hash, signed_at, key_id, previous, unsigned_through}``. Every entry hash covers the
one before it, so a signature binds the whole history up to its head; ``previous`` names the run's
signed head before it (its sequence, head hash and the digest of its signature), so the signatures
form a chain too and one surviving old signature convicts any later rewrite. ``unsigned_through``
is the run's declared pre-signing prefix. A ``/1`` signature (made before heads were chained) has
neither member. Keys are named by ``sha256:<hex>`` of their 32 raw public-key bytes and vouch only
for heads signed inside their validity window. Pure functions and the key material; the
transaction stores what :class:`HeadSigner` returns (transactions/head_signing.py).
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from shared.continuity.canonical import canonical_bytes, sha256_digest

SIGNED_HEAD_FORMAT = "forge.continuity.signed-head/2"
SIGNED_HEAD_FORMAT_V1 = "forge.continuity.signed-head/1"
SIGNING_KEYS_FORMAT = "forge.continuity.signing-keys/1"
ALGORITHM = "ed25519"
_PEM_PUBLIC_KEY = b"-----BEGIN PUBLIC KEY-----"
# Windows are compared as text: time order only in this one form (docs/formats.md, N9).
_TIMESTAMP = re.compile(r"\A\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z\Z")


class SigningKeyError(ValueError):
    """A key file that holds no usable Ed25519 key."""


@dataclass(frozen=True)
class PreviousHead:
    """The signed head a ``/2`` signature chains to."""

    sequence: int
    head_hash: str
    signature_digest: str


@dataclass(frozen=True)
class SignedHead:
    """One stored signature over a run's head."""

    run_id: str
    sequence: int
    head_hash: str
    key_id: str
    signed_at: str
    signature: bytes
    format: str = SIGNED_HEAD_FORMAT
    previous: PreviousHead | None = None
    unsigned_through: int = 0

    def statement(self) -> bytes:
        return statement(
            self.run_id,
            self.sequence,
            self.head_hash,
            self.signed_at,
            self.key_id,
            previous=self.previous,
            unsigned_through=self.unsigned_through,
            format=self.format,
        )

    def as_previous(self) -> PreviousHead:
        """How the next signature names this one."""
        return PreviousHead(self.sequence, self.head_hash, sha256_digest(self.signature))


@dataclass(frozen=True)
class PublishedKey:
    """A public key verifiers may check signatures with; ``current`` signs new heads. It vouches
    for heads signed from ``not_before`` to ``not_after`` (timestamp text; None: unbounded)."""

    key_id: str
    public_key: bytes
    current: bool
    not_before: str | None = None
    not_after: str | None = None

    def vouches_at(self, signed_at: str) -> bool:
        # Timestamps are fixed-width UTC text, so text order is time order.
        return (self.not_before is None or self.not_before <= signed_at) and (
            self.not_after is None or signed_at <= self.not_after
        )


def raw_public_key(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id_of(public_key: bytes) -> str:
    """A key's id: the digest of its 32 raw public-key bytes."""
    return sha256_digest(public_key)


def statement(
    run_id: str,
    sequence: int,
    head_hash: str,
    signed_at: str,
    key_id: str,
    *,
    previous: PreviousHead | None = None,
    unsigned_through: int = 0,
    format: str = SIGNED_HEAD_FORMAT,
) -> bytes:
    """The exact bytes a head signature covers (RFC 8785 canonical JSON)."""
    members: dict[str, object] = {
        "format": format,
        "run_id": run_id,
        "sequence": sequence,
        "head_hash": head_hash,
        "signed_at": signed_at,
        "key_id": key_id,
    }
    if format != SIGNED_HEAD_FORMAT_V1:
        members["previous"] = (
            None
            if previous is None
            else {
                "sequence": previous.sequence,
                "head_hash": previous.head_hash,
                "signature_digest": previous.signature_digest,
            }
        )
        members["unsigned_through"] = unsigned_through
    return canonical_bytes(members)


class HeadSigner:
    """The current private key, and the earlier public keys still published (key rotation)."""

    def __init__(
        self,
        key: Ed25519PrivateKey,
        earlier: Sequence[bytes | PublishedKey] = (),
        *,
        not_before: str | None = None,
    ) -> None:
        self._key = key
        self.public_key = raw_public_key(key.public_key())
        self.key_id = key_id_of(self.public_key)
        current = PublishedKey(self.key_id, self.public_key, True, not_before, None)
        keys = {self.key_id: current}
        for item in earlier:
            published = item if isinstance(item, PublishedKey) else _unbounded(item)
            keys.setdefault(published.key_id, replace(published, current=False))
        self._keys = keys
        self._verifiers = {
            key_id: Ed25519PublicKey.from_public_bytes(key.public_key)
            for key_id, key in keys.items()
        }

    @classmethod
    def generate(cls, earlier: Sequence[bytes | PublishedKey] = ()) -> HeadSigner:
        return cls(Ed25519PrivateKey.generate(), earlier)

    @classmethod
    def from_files(
        cls, key_file: str, published_file: str = "", *, not_before: str | None = None
    ) -> HeadSigner:
        """The private key of a PEM (PKCS#8) file, and the earlier signing keys of
        ``published_file``: PEM public keys (any number, concatenated; no validity window) or a
        signing-keys JSON file (``forge-continuity signing-keys export``; with windows)."""
        data = Path(key_file).read_bytes()
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as error:
            raise SigningKeyError(f"{key_file}: {error}") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise SigningKeyError(f"{key_file}: not an Ed25519 private key")
        earlier = read_published_keys(published_file) if published_file else []
        return cls(key, earlier, not_before=not_before)

    def sign(
        self,
        run_id: str,
        sequence: int,
        head_hash: str,
        signed_at: str,
        previous: PreviousHead | None = None,
        unsigned_through: int = 0,
    ) -> SignedHead:
        unsigned = SignedHead(
            run_id, sequence, head_hash, self.key_id, signed_at, b"", SIGNED_HEAD_FORMAT,
            previous, unsigned_through,
        )  # fmt: skip
        return replace(unsigned, signature=self._key.sign(unsigned.statement()))

    def distrusts(self, head: SignedHead) -> str | None:
        """Why this ledger does not vouch for ``head`` (None: its signature verifies under a key
        it publishes, inside that key's window): ``key_unknown``, ``key_outside_window`` or
        ``signature_invalid``."""
        published = self._keys.get(head.key_id)
        if published is None:
            return "key_unknown"
        if not published.vouches_at(head.signed_at):
            return "key_outside_window"
        try:
            self._verifiers[head.key_id].verify(head.signature, head.statement())
        except InvalidSignature:
            return "signature_invalid"
        return None

    def published(self) -> list[PublishedKey]:
        """The current key first, then each earlier key still published."""
        return list(self._keys.values())

    def private_pem(self) -> bytes:
        return self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def public_pem(self) -> bytes:
        return self._key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


def _unbounded(raw: bytes) -> PublishedKey:
    return PublishedKey(key_id_of(raw), raw, False)


def read_public_keys(path: str) -> list[bytes]:
    """The raw bytes of every PEM Ed25519 public key in ``path``, in file order."""
    data = Path(path).read_bytes()
    keys: list[bytes] = []
    for part in data.split(_PEM_PUBLIC_KEY)[1:]:
        try:
            key = serialization.load_pem_public_key(_PEM_PUBLIC_KEY + part)
        except ValueError as error:
            raise SigningKeyError(f"{path}: {error}") from None
        if not isinstance(key, Ed25519PublicKey):
            raise SigningKeyError(f"{path}: not an Ed25519 public key")
        keys.append(raw_public_key(key))
    return keys


def read_published_keys(path: str) -> list[PublishedKey]:
    """Earlier signing keys: a signing-keys JSON file (docs/formats.md, "Signing keys file"), or
    concatenated PEM public keys, which carry no window."""
    data = Path(path).read_bytes()
    if not data.lstrip().startswith(b"{"):
        return [_unbounded(raw) for raw in read_public_keys(path)]
    try:
        document = json.loads(data)
        keys = [_published_from_json(item) for item in document["keys"]]
        if document.get("format") != SIGNING_KEYS_FORMAT:
            raise ValueError(f"format is not {SIGNING_KEYS_FORMAT}")
    except (ValueError, KeyError, TypeError) as error:
        raise SigningKeyError(f"{path}: {error}") from None
    return keys


def _published_from_json(item: dict[str, object]) -> PublishedKey:
    if item.get("algorithm") != ALGORITHM:
        raise ValueError("only ed25519 keys are known")
    raw = base64.b64decode(str(item["public_key"]), validate=True)
    if len(raw) != 32 or key_id_of(raw) != item.get("key_id"):
        raise ValueError(f"{item.get('key_id')} is not its key's digest")
    not_before, not_after = item.get("not_before"), item.get("not_after")
    for bound in (not_before, not_after):
        if bound is not None and not (isinstance(bound, str) and _TIMESTAMP.match(bound)):
            raise ValueError("not_before and not_after are YYYY-MM-DDTHH:MM:SS.ffffffZ or null")
    return PublishedKey(key_id_of(raw), raw, False, not_before, not_after)  # type: ignore[arg-type]


def signing_keys_document(keys: Sequence[PublishedKey]) -> dict[str, object]:
    """The signing-keys JSON file of ``keys`` (what verifiers pin and ledgers publish)."""
    return {
        "format": SIGNING_KEYS_FORMAT,
        "keys": [
            {
                "key_id": key.key_id,
                "algorithm": ALGORITHM,
                "public_key": base64.b64encode(key.public_key).decode("ascii"),
                "not_before": key.not_before,
                "not_after": key.not_after,
            }
            for key in keys
        ],
    }


def write_new_key(path: Path) -> HeadSigner:
    """Generate a signing key into ``path`` (readable by its owner only) and return it."""
    signer = HeadSigner.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(signer.private_pem())
    return signer
