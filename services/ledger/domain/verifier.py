"""The verification hook of reconciliation (ADR 0010): a deployment plugs in its own verifier of
what only it can observe (the prior owner's process or node, the provider's effect records).

The ledger asks the verifier about one inspected snapshot and records only a complete proof:
cessation of the prior owner, exposure within its reservation, and no effect or retry-safe. The
default verifier proves nothing, so without a deployment verifier no retry is ever admitted
(MARK_UNRESOLVED stays available). A verifier that raises, or answers late, proves nothing either.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from services.ledger.domain.reconciliation import Snapshot


@dataclass(frozen=True)
class VerificationSubject:
    """What the verifier is asked about."""

    snapshot: Snapshot
    evidence_reference: str
    requested_by: str


@dataclass(frozen=True)
class VerificationProof:
    """What the verifier could prove; anything left False or unknown refuses the retry."""

    cessation_verified: bool
    exposure_within_reservation: bool
    #: "no_effect", "retry_safe" or "unknown".
    effect: str
    #: How long the proof counts (the ledger caps it).
    valid_for_seconds: int
    detail: str

    @property
    def complete(self) -> bool:
        return (
            self.cessation_verified
            and self.exposure_within_reservation
            and self.effect in ("no_effect", "retry_safe")
            and self.valid_for_seconds > 0
        )


@runtime_checkable
class ReconciliationVerifier(Protocol):
    """A deployment's verifier. ``verify`` must not write to the ledger and should bound its own
    time; the ledger treats an exception as "nothing proven"."""

    @property
    def name(self) -> str: ...

    def verify(self, subject: VerificationSubject) -> VerificationProof: ...


class RefusingVerifier:
    """The default: it can observe nothing outside the ledger, so it proves nothing."""

    name = "refusing-default"

    def verify(self, subject: VerificationSubject) -> VerificationProof:
        return VerificationProof(
            cessation_verified=False,
            exposure_within_reservation=False,
            effect="unknown",
            valid_for_seconds=0,
            detail="no deployment verifier is configured; a timeout or a missing result proves "
            "nothing",
        )


#: Verifiers the ledger ships, by the name ``FORGE_RECONCILIATION_VERIFIER`` may give instead
#: of ``package.module:attribute`` (imported only when chosen: they observe the host).
BUILT_IN = {
    "refusing": "services.ledger.domain.verifier:RefusingVerifier",
    "local-process": "services.ledger.local_process_verifier:LocalProcessVerifier",
}


def load_verifier(spec: str) -> ReconciliationVerifier:
    """A built-in name (:data:`BUILT_IN`) or ``"package.module:attribute"`` (a verifier, or a
    class or factory taking no arguments); an empty spec is the refusing default."""
    if not spec:
        return RefusingVerifier()
    spec = BUILT_IN.get(spec, spec)
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"verifier {spec!r} is not 'package.module:attribute'")
    target = getattr(importlib.import_module(module_name), attribute)
    verifier = target() if isinstance(target, type) or not hasattr(target, "verify") else target
    if not isinstance(verifier, ReconciliationVerifier):
        raise ValueError(f"{spec} is not a reconciliation verifier")
    return verifier
