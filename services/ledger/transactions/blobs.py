"""Content-addressed blobs: stored bytes never change."""

from __future__ import annotations

from services.ledger.repository import blobs as blob_rows
from services.ledger.transactions.base import LedgerContext, retry_on_unique_conflict
from shared.continuity.canonical import is_digest, sha256_digest
from shared.runtime.errors import FieldViolation, InvalidArgument, NotFound, field_invalid

MAX_BLOB_BYTES = 16 * 1024 * 1024
DEFAULT_MEDIA_TYPE = "application/octet-stream"
#: The width of the column that stores a blob's media type.
MAX_MEDIA_TYPE_LENGTH = 128


def put(
    context: LedgerContext, content: bytes, media_type: str, expected_digest: str
) -> tuple[str, bool]:
    """Store bytes under their digest; idempotent. Returns (digest, created)."""
    if len(content) > MAX_BLOB_BYTES:
        raise InvalidArgument(
            "BLOB_TOO_LARGE",
            f"blobs are limited to {MAX_BLOB_BYTES} bytes",
            metadata={"limit_bytes": str(MAX_BLOB_BYTES)},
            field_violations=[FieldViolation("content", "too large")],
        )
    if len(media_type) > MAX_MEDIA_TYPE_LENGTH:
        raise field_invalid(
            "media_type",
            f"at most {MAX_MEDIA_TYPE_LENGTH} characters",
            f"media_type is longer than {MAX_MEDIA_TYPE_LENGTH} characters",
        )
    digest = sha256_digest(content)
    if expected_digest and expected_digest != digest:
        raise InvalidArgument(
            "BLOB_DIGEST_MISMATCH",
            f"content digests to {digest}, not {expected_digest}",
            metadata={"digest": digest, "expected_digest": expected_digest},
            field_violations=[FieldViolation("expected_digest", "does not match content")],
        )
    return digest, _store(context, digest, content, media_type or DEFAULT_MEDIA_TYPE)


@retry_on_unique_conflict
def _store(context: LedgerContext, digest: str, content: bytes, media_type: str) -> bool:
    """Insert unless stored; the same bytes stored concurrently answer created=False."""
    with context.engine.begin() as connection:
        if blob_rows.blob_exists(connection, digest):
            return False
        blob_rows.insert_blob(connection, digest, content, media_type, context.now())
        return True


def get(context: LedgerContext, digest: str) -> tuple[bytes, str]:
    """(content, media type) of a stored blob."""
    if not is_digest(digest):
        raise field_invalid("digest", "must be sha256:<64 hex>", "digest must be sha256:<64 hex>")
    with context.read() as connection:
        found = blob_rows.get_blob(connection, digest)
    if found is None:
        raise NotFound("BLOB_NOT_FOUND", f"no blob {digest}", metadata={"digest": digest})
    return found
