"""Signed heads: which keys are trusted and when, the chain of signatures, a trusted signature at
every head, and the heads a monitor witnessed (docs/formats.md, "Signed head", "Signing keys
file", "Heads file", "What the verifier checks").

Memory holds the trusted keys, the last signed head, the unsigned stretches seen before the run's
first chained (``/2``) signature states its pre-signing prefix, and the witnessed heads of this
run; never the entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from forge_audit import SIGNED_HEAD_FORMAT, SIGNED_HEAD_FORMAT_V1
from forge_audit.jcs import canonical, sha256
from forge_audit.records import Broken, Record

#: The one form of a timestamp compared as text (docs/formats.md, Primitives, N9).
TIMESTAMP = re.compile(r"\A\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z\Z")


def is_timestamp(value: object) -> bool:
    return isinstance(value, str) and TIMESTAMP.match(value) is not None


@dataclass(frozen=True)
class TrustedKey:
    """A public key and the window of signed_at it vouches for (None: unbounded)."""

    key: Ed25519PublicKey
    not_before: str | None = None
    not_after: str | None = None

    def vouches_at(self, signed_at: str) -> bool:
        # Timestamps are fixed-width UTC text: text order is time order.
        return (self.not_before is None or self.not_before <= signed_at) and (
            self.not_after is None or signed_at <= self.not_after
        )


@dataclass(frozen=True)
class SignedHeadFacts:
    """One signed head's members, read and checked for type."""

    run_id: str
    sequence: int
    head_hash: str
    key_id: str
    signed_at: str
    signature: bytes
    format: str
    previous: tuple[int, str, str] | None
    unsigned_through: int

    def statement(self) -> bytes:
        members: dict[str, Any] = {
            "format": self.format,
            "run_id": self.run_id,
            "sequence": self.sequence,
            "head_hash": self.head_hash,
            "signed_at": self.signed_at,
            "key_id": self.key_id,
        }
        if self.format == SIGNED_HEAD_FORMAT:
            members["previous"] = self.previous and dict(
                zip(("sequence", "head_hash", "signature_digest"), self.previous, strict=True)
            )
            members["unsigned_through"] = self.unsigned_through
        return canonical(members)

    def as_previous(self) -> tuple[int, str, str]:
        return self.sequence, self.head_hash, sha256(self.signature)


def read_signed_head(record: Record) -> SignedHeadFacts:
    """The members of a ``signed_head`` record (a bundle's or a heads file's line)."""
    head_format = record.members.get("format", SIGNED_HEAD_FORMAT_V1)
    if head_format not in (SIGNED_HEAD_FORMAT, SIGNED_HEAD_FORMAT_V1):
        raise record.broken("record_invalid", f"unknown signed head format {head_format!r}")
    previous: tuple[int, str, str] | None = None
    unsigned_through = 0
    if head_format == SIGNED_HEAD_FORMAT:
        named = record.members.get("previous", "absent")
        if named is not None:
            link = Record(named if isinstance(named, dict) else {}, record.line, record.sequence)
            if not isinstance(named, dict):
                raise record.broken("record_invalid", "previous must be an object or null")
            previous = (
                link.integer("sequence"),
                link.digest("head_hash"),
                link.digest("signature_digest"),
            )
        unsigned_through = record.integer("unsigned_through")
    signed_at = record.text("signed_at")
    if not is_timestamp(signed_at):
        raise record.broken("record_invalid", "signed_at must be YYYY-MM-DDTHH:MM:SS.ffffffZ")
    return SignedHeadFacts(
        record.text("run_id"),
        record.integer("sequence"),
        record.text("head_hash"),
        record.text("key_id"),
        signed_at,
        record.base64("signature"),
        head_format,
        previous,
        unsigned_through,
    )


@dataclass
class Trust:
    """The keys signatures are checked with: the pinned ones (``--trusted-key``) when given, else
    the bundle's own (``--trust-bundle-keys``). A head must lie inside every window stated for
    its key, pinned or published."""

    pinned: dict[str, TrustedKey]
    bundle_keys_trusted: bool = False
    published: dict[str, TrustedKey] = field(default_factory=dict)

    @property
    def from_bundle(self) -> bool:
        return not self.pinned

    def check(self, head: SignedHeadFacts, record: Record) -> None:
        """Break unless ``head``'s signature verifies under a trusted key inside its window."""
        trusted = self.pinned or (self.published if self.bundle_keys_trusted else {})
        key = trusted.get(head.key_id)
        if key is None:
            if head.key_id in self.published:
                raise record.broken("signing_key_untrusted", f"{head.key_id} is not a trusted key")
            raise record.broken("signing_key_unknown", f"{head.key_id} is not published")
        windows = [key, self.published.get(head.key_id, key)]
        if not all(window.vouches_at(head.signed_at) for window in windows):
            raise record.broken(
                "signing_key_outside_window",
                f"{head.key_id} does not vouch for a head signed at {head.signed_at}",
            )
        try:
            key.key.verify(head.signature, head.statement())
        except InvalidSignature:
            raise record.broken("signature_invalid", "the signature does not verify") from None


class HeadChain:
    """Feed each entry (``entry``) and each signed head (``signed``) in bundle order, then
    ``end``. Every head needs a trusted signature except the settlement of a settlement+claim
    pair and the run's declared pre-signing prefix; each ``/2`` signature names the signature
    before it; the journal must extend every witnessed head."""

    def __init__(
        self, trust: Trust, witnessed: dict[int, str], *, allow_unsigned: bool = False
    ) -> None:
        self.trust = trust
        self._witnessed = witnessed
        self._allow_unsigned = allow_unsigned
        self._last: SignedHeadFacts | None = None  # the last signed head
        self._last_chained: SignedHeadFacts | None = None  # the last /2 one (a /1 may follow)
        self._unsigned_through: int | None = None  # stated by the first /2 signature
        self._unsigned: list[list[int]] = []  # stretches before it: [first, last]
        self._open: tuple[int, bool] | None = (
            None  # the entry awaiting its signature, a settlement?
        )
        self.unsigned_accepted = 0

    def entry(self, sequence: int, hash_: str, *, settlement: bool, line: int) -> None:
        self._settle(covered_by_next=True, line=line)
        known = self._witnessed.get(sequence)
        if known is not None and known != hash_:
            raise Broken(sequence, "fork", f"a monitor witnessed {known} at {sequence}", line)
        self._open = (sequence, settlement)

    def signed(self, record: Record) -> SignedHeadFacts:
        head = read_signed_head(record)
        self.trust.check(head, record)
        last = self._last
        if head.format == SIGNED_HEAD_FORMAT:
            expected = None if last is None else last.as_previous()
            if head.previous != expected:
                raise record.broken(
                    "signature_chain_broken", "previous does not name the signed head before it"
                )
            # compared with the /2 signature before it, whatever /1 signatures lie between
            chained = self._last_chained
            if chained is not None:
                if head.unsigned_through != chained.unsigned_through:
                    raise record.broken(
                        "signature_chain_broken", "unsigned_through changed along the chain"
                    )
                if head.signed_at < chained.signed_at:
                    raise record.broken(
                        "signature_chain_broken", "signed_at is earlier than the head before it"
                    )
            if self._unsigned_through is None:
                self._state_prefix(head.unsigned_through, record.line)
            self._last_chained = head
        self._last, self._open = head, None
        return head

    def _state_prefix(self, through: int, line: int) -> None:
        self._unsigned_through = through
        for first, last in self._unsigned:
            if last > through:
                self._unsigned_head(max(first, through + 1), line)
        self._unsigned.clear()

    def _settle(self, *, covered_by_next: bool, line: int) -> None:
        """The open entry got no signature: fine for a settlement its claim covers (the claim is
        checked to follow it) and inside the declared prefix; a break otherwise."""
        if self._open is None:
            return
        sequence, settlement = self._open
        self._open = None
        if settlement and covered_by_next:
            return
        if self._unsigned_through is None:
            stretches = self._unsigned
            if stretches and stretches[-1][1] == sequence - 1:
                stretches[-1][1] = sequence
            else:
                stretches.append([sequence, sequence])
        elif sequence > self._unsigned_through:
            self._unsigned_head(sequence, line)

    def _unsigned_head(self, sequence: int, line: int) -> None:
        if self._allow_unsigned:
            self.unsigned_accepted += 1
            return
        raise Broken(sequence, "head_unsigned", "no trusted signature at this head", line)

    def end(self, last_sequence: int, line: int) -> None:
        """The journal ended at ``last_sequence``."""
        self._settle(covered_by_next=False, line=line)
        if self._unsigned_through is None:
            for first, last in self._unsigned:
                for sequence in range(first, last + 1) if self._allow_unsigned else (first,):
                    self._unsigned_head(sequence, line)
            self._unsigned.clear()
        beyond = [sequence for sequence in self._witnessed if sequence > last_sequence]
        if beyond:
            newest = max(beyond)
            raise Broken(
                newest,
                "rollback",
                f"the journal ends at {last_sequence}; a monitor witnessed the head at {newest}",
                line,
            )

    @property
    def witnessed(self) -> int:
        """How many witnessed heads of the run the journal was checked against."""
        return len(self._witnessed)
