"""The one atomic append an invalid-read admission asks of the ledger (``CommitAdmission``): the
admission service builds it once its checks pass; the ledger re-checks it against its own rows
and commits it. One type on both sides, translated by ``shared.contract.commit_admission_proto``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class CommitAdmission:
    """Everything the ledger needs for the one atomic append; it re-checks head, caps, policy
    revision, outstanding claims and idempotency itself."""

    run_id: str
    request_id: str
    operator_identity: str
    request_content_digest: str
    expected_head_hash: str
    policy_revision: int
    digests: Mapping[str, str]
    version: int
    valid_for_seconds: int
    derived_checkpoint_digest: str
    consumed_response_digest: str
    witness_digest: str
    #: Empty when the blob is already stored.
    derived_checkpoint: bytes = b""
