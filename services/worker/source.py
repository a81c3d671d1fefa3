"""What the worker derives about itself and presents to the ledger (ADR 0039): the revision of
its source tree and the digest of its installed adapter, so a worker deployed with other code
than the run's is refused at the claim instead of vouched for by its configuration.

- Source revision of ``FORGE_WORKER_SOURCE_DIR``: ``git:<HEAD commit>`` for a git work tree
  (what is committed: a worker runs a clean checkout), else ``tree:<digest>``, the digest of
  every file under it as the qualified-profile digest computes one
  (``shared.continuity.qualification.tree_digest``; bytecode caches left out).
- Profile: the profile name is presented only when its registered digest is the installed code's
  digest, computed by ``shared.continuity.qualification`` exactly as the services compute it;
  else the worker does not claim (PROFILE_NOT_QUALIFIED, nothing written). The claim also
  carries that installed digest (``profile_digest``), which the ledger compares with the digest
  its registry qualifies for the profile (PROFILE_DIGEST_MISMATCH; ADR 0045): a worker and a
  ledger that disagree about the profile's code do not run it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from shared.continuity.qualification import installed_profile, qualification_problem, tree_digest

GIT_PREFIX = "git:"
TREE_PREFIX = "tree:"


def source_revision(root: Path) -> str:
    """The revision the worker presents for the source tree at ``root``."""
    if (root / ".git").exists():
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--verify", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        )
        if head.returncode == 0 and head.stdout.strip():
            return GIT_PREFIX + head.stdout.strip()
    return TREE_PREFIX + tree_digest(root)


def profile_problem(profile: str) -> str | None:
    """Why this worker's installed code is not the registered code of ``profile`` (None: it
    is), by the services' own qualification digest."""
    return qualification_problem(profile)


def profile_digest() -> str:
    """The qualified profile digest of this worker's installed code, as the services compute it
    (presented at the claim)."""
    return installed_profile().digest
