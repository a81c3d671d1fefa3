"""The run's adopted checkpoint-mode policy epoch is in the compatibility catalog.

Recognition itself (qualified profile, enabled finite-lease policy) happens in the ledger's
admission transaction; the profile and the policy have their own holds here, so this check only
reports an adoption the catalog does not know, or a malformed one, before anything is submitted.
"""

from __future__ import annotations

from services.candidate.domain.facts import Facts
from services.candidate.domain.journal import RUN_STARTED
from services.candidate.domain.model import Hold, HoldReason, hold
from shared.continuity.policy_epochs import MODE_FIELD, catalogued, mode_tuple_of
from shared.runtime.errors import DomainError


def adopted_epoch(facts: Facts) -> list[Hold]:
    holds: list[Hold] = []
    for start in (e for e in facts.entries if e.kind == RUN_STARTED):
        subject = f"{start.sequence}/{MODE_FIELD}"
        try:
            adopted = mode_tuple_of(start.payload or {})
        except DomainError:
            holds.append(
                hold(HoldReason.IDENTITY_UNREGISTERED, subject, "the adoption is malformed")
            )
            continue
        if adopted is not None and catalogued(adopted) is None:
            holds.append(
                hold(
                    HoldReason.IDENTITY_UNREGISTERED,
                    subject,
                    f"checkpoint-mode adoption {adopted.as_dict()} is not a reviewed policy "
                    "epoch of the compatibility catalog",
                )
            )
    return holds
