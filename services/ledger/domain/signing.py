"""Signed journal heads: the ledger's Ed25519 signature over the head each committing append makes
(ADR 0015, docs/formats.md "Signed head").

A signature covers the canonical statement ``{format, run_id, sequence, head_hash, signed_at,
key_id}``; because every entry hash covers the one before it, a signature over a head binds the
whole history up to it, and a consistent rewrite from genesis no longer matches a head signed
earlier. Keys are named by ``sha256:<hex>`` of their 32 raw public-key bytes. Pure functions and
the key material; the transaction stores what :class:`HeadSigner` returns.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from shared.continuity.canonical import canonical_bytes, sha256_digest

SIGNED_HEAD_FORMAT = "forge.continuity.signed-head/1"
ALGORITHM = "ed25519"
_PEM_PUBLIC_KEY = b"-----BEGIN PUBLIC KEY-----"


class SigningKeyError(ValueError):
    """A key file that holds no usable Ed25519 key."""


@dataclass(frozen=True)
class SignedHead:
    """One stored signature over a run's head."""

    run_id: str
    sequence: int
    head_hash: str
    key_id: str
    signed_at: str
    signature: bytes


@dataclass(frozen=True)
class PublishedKey:
    """A public key verifiers may check signatures with; ``current`` signs new heads."""

    key_id: str
    public_key: bytes
    current: bool


def raw_public_key(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id_of(public_key: bytes) -> str:
    """A key's id: the digest of its 32 raw public-key bytes."""
    return sha256_digest(public_key)


def statement(run_id: str, sequence: int, head_hash: str, signed_at: str, key_id: str) -> bytes:
    """The exact bytes a head signature covers (RFC 8785 canonical JSON)."""
    return canonical_bytes(
        {
            "format": SIGNED_HEAD_FORMAT,
            "run_id": run_id,
            "sequence": sequence,
            "head_hash": head_hash,
            "signed_at": signed_at,
            "key_id": key_id,
        }
    )


class HeadSigner:
    """The current private key, and the earlier public keys still published (key rotation)."""

    def __init__(self, key: Ed25519PrivateKey, earlier: Sequence[bytes] = ()) -> None:
        self._key = key
        self.public_key = raw_public_key(key.public_key())
        self.key_id = key_id_of(self.public_key)
        self._earlier = tuple(raw for raw in dict.fromkeys(earlier) if raw != self.public_key)

    @classmethod
    def generate(cls) -> HeadSigner:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_files(cls, key_file: str, published_file: str = "") -> HeadSigner:
        """The private key of a PEM (PKCS#8) file, and the PEM public keys of earlier signing
        keys in ``published_file`` (any number, concatenated)."""
        data = Path(key_file).read_bytes()
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as error:
            raise SigningKeyError(f"{key_file}: {error}") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise SigningKeyError(f"{key_file}: not an Ed25519 private key")
        earlier = read_public_keys(published_file) if published_file else []
        return cls(key, earlier)

    def sign(self, run_id: str, sequence: int, head_hash: str, signed_at: str) -> SignedHead:
        signature = self._key.sign(statement(run_id, sequence, head_hash, signed_at, self.key_id))
        return SignedHead(run_id, sequence, head_hash, self.key_id, signed_at, signature)

    def published(self) -> list[PublishedKey]:
        """The current key first, then each earlier key still published."""
        return [PublishedKey(self.key_id, self.public_key, True)] + [
            PublishedKey(key_id_of(raw), raw, False) for raw in self._earlier
        ]

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


def write_new_key(path: Path) -> HeadSigner:
    """Generate a signing key into ``path`` (readable by its owner only) and return it."""
    signer = HeadSigner.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(signer.private_pem())
    return signer
