"""Candidate checks: pure functions ``Facts -> list[Hold]``.

``common`` holds the checks every held-run candidate shares; ``invalid_read`` the invalid-read
continuity specifics (and its proof); ``reconstruction_reasons`` maps reconstruction's reasons to
holds. A workflow (``..workflows``) composes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from ..facts import Facts
from ..model import Hold

Check: TypeAlias = Callable[[Facts], list[Hold]]

__all__ = ["Check"]
