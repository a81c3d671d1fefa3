"""The derived checkpoint a commit stores, as the candidate computed it (one pass of proof, ADR
0007 amendment and ADR 0013): the bytes, their digest and the witness digest, and the one check
admission makes before it forwards them. The ledger checks the bytes again inside its
transaction."""

from __future__ import annotations

from dataclasses import dataclass

from shared.continuity.canonical import is_digest, sha256_digest
from shared.runtime.errors import FailedPrecondition, FieldViolation


@dataclass(frozen=True)
class DerivedCheckpoint:
    """A new derived checkpoint a request continues from, with its witness digest."""

    content: bytes
    digest: str
    witness_digest: str

    def violations(self) -> list[FieldViolation]:
        found: list[FieldViolation] = []
        for name, value in (
            ("derived_checkpoint_digest", self.digest),
            ("witness_digest", self.witness_digest),
        ):
            if not is_digest(value):
                found.append(FieldViolation(name, "must be sha256:<64 hex>"))
        if sha256_digest(self.content) != self.digest:
            found.append(
                FieldViolation("derived_checkpoint", "the bytes do not hash to their digest")
            )
        return found


def proved(
    sent: DerivedCheckpoint | None, *, digest: str, witness_digest: str | None = None
) -> DerivedCheckpoint:
    """``sent`` checked against the proof the candidate digest covers: the bytes hash to the
    proof's ``digest``, and the digests sent with them are the proof's (the witness only where
    the proof binds one). Bytes that pass are the ones the operator's digests name.

    FAILED_PRECONDITION DERIVED_CHECKPOINT_MISSING when an eligible candidate sent none,
    RECONSTRUCTION_MISMATCH when they differ from the proof."""
    if sent is None or not digest:
        raise FailedPrecondition(
            "DERIVED_CHECKPOINT_MISSING",
            "the eligible candidate came without the derived checkpoint its proof names",
            metadata={"digest": digest},
        )
    received = sha256_digest(sent.content)
    checks = [
        ("derived checkpoint bytes", received, digest),
        ("derived_checkpoint_digest", sent.digest, digest),
    ]
    if witness_digest is not None:
        checks.append(("witness_digest", sent.witness_digest, witness_digest))
    differing = [name for name, got, want in checks if got != want]
    if differing:
        raise FailedPrecondition(
            "RECONSTRUCTION_MISMATCH",
            f"the {', '.join(differing)} sent with the candidate differ from its proof",
            metadata={"candidate": digest, "reconstructed": received},
        )
    return sent
