"""Source reader (``list_files``) of the Firefly Agentic 26.10.1 reference worker, kept verbatim.

This file is the published historical source-reader implementation a version-2 or read-only
observation proof pins: its name, version and SHA-256 source hash are in
``shared.continuity.sdk_epochs.PUBLISHED_SOURCE_READER``. Forge never runs it (an unretained read
stays unavailable; a retained result is reused as stored). Do not edit or reformat it; a changed
hash makes every proof that names it ineligible until reviewed.
"""

from __future__ import annotations

from pathlib import Path


def list_files(root: Path, path: str) -> list[str]:
    """Every file below ``root / path``, relative to ``root``, sorted."""
    base = (root / path).resolve()
    return sorted(str(p.relative_to(root)) for p in base.rglob("*") if p.is_file())
