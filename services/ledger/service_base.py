"""The shared part of the ledger facade (``services.ledger.service.Ledger``): its state and the
steps around a transaction (a refusal's handoff, the expiry sweep run first and its event lines).
The facade's methods live in ``service`` and ``service_execution``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from forge.continuity.v1 import common_pb2
from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.recovery_authority import Authority, no_authority
from services.ledger.domain.signing import HeadSigner
from services.ledger.domain.verifier import ReconciliationVerifier, RefusingVerifier
from services.ledger.transactions import execution_stops
from services.ledger.transactions.base import LedgerContext
from services.ledger.transactions.followers import JournalFollowers
from services.ledger.transactions.refusal_handoff import BoundAction, handoff_of
from shared.continuity.timeutil import Clock, utc_now
from shared.runtime.errors import DomainError, RefusalDetail
from shared.runtime.events import record_event
from shared.runtime.limits import StreamBounds, stream_bounds

T = TypeVar("T")


def request_event(what: str, actor: str, record: ExecutionRequestRecord, **extra: object) -> None:
    record_event(
        what,
        actor=actor,
        outcome=record.state.value,
        run_id=record.run_id,
        request_id=record.request_id,
        execution_request_id=record.execution_request_id,
        lease_generation=record.lease_generation,
        **extra,
    )


class LedgerBase:
    """What every part of the facade shares: the transaction context, the authority asked inside
    recovery transactions, the verifier, the journal followers, and the steps run around a
    transaction (a refusal's handoff, the expiry sweep first)."""

    def __init__(
        self,
        engine: Engine,
        clock: Clock = utc_now,
        *,
        stream_limits: StreamBounds | None = None,
        authority: Authority = no_authority,
        verifier: ReconciliationVerifier | None = None,
        signer: HeadSigner | None = None,
    ) -> None:
        # With a signer, every append signs the head it makes (ADR 0015).
        self._context = LedgerContext(engine, clock, signer)
        # Current roles of an identity, asked inside every recovery transaction.
        self._authority = authority
        # The deployment's reconciliation verifier; the default proves nothing.
        self._verifier = verifier if verifier is not None else RefusingVerifier()
        self.journal_followers = JournalFollowers(
            stream_bounds() if stream_limits is None else stream_limits, self._context
        )

    def _handing_off(self, bound: BoundAction) -> RefusalDetail[common_pb2.HandoffPayload]:
        """Around a continuation action: each refusal by the state carries the handoff of the
        request it was bound to (ADR 0046), read only then."""
        return RefusalDetail(
            common_pb2.HandoffPayload, lambda refused: handoff_of(self._context, refused, bound)
        )

    def _expiring(self, transaction: Callable[[execution_stops.Expiry], T]) -> T:
        """Run one of the transactions that count queued requests (admission, recovery,
        reconciliation) with the expiry sweep as its first step (execution_stops.Expiry): what
        it expired leaves its event lines once committed. A refusal rolled the sweep back with
        the rest; what was due then expires in its own transaction before the refusal travels
        on, so the state a refusal leaves is the one a sweep run first would have left."""
        expiry = execution_stops.Expiry(self._context)
        try:
            result = transaction(expiry)
        except DomainError:
            if expiry.expired:
                self.expire_due()
            raise
        self._expired(expiry.expired)
        return result

    def expire_due(self) -> list[ExecutionRequestRecord]:
        """On request, and after a refusal rolled back the sweep inside a transaction that counts
        queued requests (``_expiring``): expired queued requests free their place (a sweep that
        loses a race runs again next time). A claim of an expired request is refused
        (LEASE_EXPIRED) and writes nothing."""
        return self._sweeping(execution_stops.expire_due)

    def sweep_expired(self) -> list[ExecutionRequestRecord]:
        """The scheduled sweep (``services.ledger.expiry_sweep``): as :meth:`expire_due`, by one
        replica at a time."""
        return self._sweeping(execution_stops.sweep_on_schedule)

    def _sweeping(
        self, sweep: Callable[[LedgerContext], list[ExecutionRequestRecord]]
    ) -> list[ExecutionRequestRecord]:
        """One expiry sweep in its own transaction; one that lost a race expired nothing."""
        try:
            expired = sweep(self._context)
        except IntegrityError:
            return []
        self._expired(expired)
        return expired

    @staticmethod
    def _expired(expired: list[ExecutionRequestRecord]) -> None:
        for record in expired:
            request_event("expiry", "ledger", record)
