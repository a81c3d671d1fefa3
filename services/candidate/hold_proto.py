"""Protobuf translation of the candidate's holds (a held run's candidate and every recovery
candidate report them the same way)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

from forge.continuity.v1 import common_pb2
from services.candidate.domain.model import Hold, HoldReason, Requirement
from shared.contract.terms import enum_number

# Each domain member's contract number, looked up once: a long journal's candidate can carry a
# hold per entry, and the name lookup per hold was a tenth of its conversion.
_REASONS: Final = {r: enum_number(common_pb2.HoldReason, r.value) for r in HoldReason}
_REQUIREMENTS: Final = {r: enum_number(common_pb2.HoldRequirement, r.value) for r in Requirement}


def add_holds(
    into: RepeatedCompositeFieldContainer[common_pb2.Hold], holds: Iterable[Hold]
) -> None:
    """Each hold as a new element of the response's own repeated field: a list of messages handed
    to a constructor is copied element by element, which costs as much again."""
    add, reasons, requirements = into.add, _REASONS, _REQUIREMENTS
    for h in holds:
        add(
            reason=reasons[h.reason],
            requirement=requirements[h.requirement],
            detail=h.detail,
            subject=h.subject,
        )
