"""Candidate checks: pure functions ``Facts -> list[Hold]``.

``common`` holds the checks every held-run candidate shares; ``invalid_read`` the invalid-read
continuity specifics (and its proof); ``reconstruction_reasons`` maps reconstruction's reasons to
holds. A workflow (``..workflows``) composes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeAlias

from services.candidate.domain.facts import Facts
from services.candidate.domain.model import Entry, Hold, JournalHead, RunRecord, Snapshot

Check: TypeAlias = Callable[[Facts], list[Hold]]


class HeldRun(Protocol):
    """What the checks every held-run candidate shares read: the invalid-read ``Facts`` and a
    recovery's ``RecoveryFacts`` both fit, so a recovery reuses them as they are."""

    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def run(self) -> RunRecord: ...

    @property
    def head(self) -> JournalHead: ...

    @property
    def entries(self) -> tuple[Entry, ...]: ...

    @property
    def qualified(self) -> bool: ...


__all__ = ["Check", "HeldRun"]
