"""Signed heads, signing keys and the head feed to protobuf (ADR 0015; docs/formats.md)."""

from __future__ import annotations

from forge.continuity.v1 import audit_pb2
from services.ledger.domain.signing import ALGORITHM, PublishedKey, SignedHead
from services.ledger.transactions.signed_heads import HeadFeedPage
from shared.continuity.timeutil import to_timestamp


def signed_head_to_proto(head: SignedHead) -> audit_pb2.SignedHead:
    previous = head.previous
    return audit_pb2.SignedHead(
        run_id=head.run_id,
        sequence=head.sequence,
        head_hash=head.head_hash,
        key_id=head.key_id,
        signed_at=to_timestamp(head.signed_at),
        signature=head.signature,
        format=head.format,
        previous=None
        if previous is None
        else audit_pb2.PreviousSignedHead(
            sequence=previous.sequence,
            head_hash=previous.head_hash,
            signature_digest=previous.signature_digest,
        ),
        unsigned_through=head.unsigned_through,
    )


def signing_keys_to_proto(keys: list[PublishedKey]) -> audit_pb2.GetSigningKeysResponse:
    return audit_pb2.GetSigningKeysResponse(
        keys=[
            audit_pb2.SigningKey(
                key_id=key.key_id,
                algorithm=ALGORITHM,
                public_key=key.public_key,
                current=key.current,
                not_before=to_timestamp(key.not_before),
                not_after=to_timestamp(key.not_after),
            )
            for key in keys
        ]
    )


def head_feed_to_proto(page: HeadFeedPage) -> audit_pb2.ListHeadsResponse:
    return audit_pb2.ListHeadsResponse(
        heads=[signed_head_to_proto(head) for head in page.heads],
        next_cursor=page.next_cursor,
        caught_up=page.caught_up,
        settle_seconds=page.settle_seconds,
    )
