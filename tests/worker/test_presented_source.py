"""What the worker presents is derived, not read back (ADR 0039): the revision of its source
tree (a git checkout's HEAD, else the tree digest) and a profile whose registered digest is its
installed code's, with that digest (ADR 0045). A worker whose tree is not the run's revision
cannot claim. Four real services, SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from forge.continuity.v1 import common_pb2
from services.demo.scripted_provider import ScriptedProvider
from services.worker.run import EXIT_COMPLETED, EXIT_NOTHING_TO_RUN
from services.worker.source import source_revision
from shared.continuity.qualification import installed_profile, tree_digest
from tests.worker.conftest import Continuation, commit_tree


def test_a_git_checkout_presents_its_head_and_a_plain_tree_its_digest(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    (plain / "src").mkdir(parents=True)
    (plain / "src" / "a.py").write_text("A = 1\n")
    assert source_revision(plain) == "tree:" + tree_digest(plain)
    (plain / "src" / "a.py").write_text("A = 2\n")
    assert source_revision(plain) == "tree:" + tree_digest(plain)  # any change is another one

    checkout = tmp_path / "checkout"
    (checkout / "src").mkdir(parents=True)
    (checkout / "src" / "a.py").write_text("A = 1\n")
    commit_tree(checkout)
    head = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert source_revision(checkout) == f"git:{head}"
    (checkout / "build.log").write_text("artifact\n")  # untracked output: the same HEAD
    assert source_revision(checkout) == f"git:{head}"


def test_a_worker_in_another_tree_than_the_runs_cannot_claim(
    admitted: Continuation, provider: ScriptedProvider, tmp_path: Path
) -> None:
    # Before, the worker presented the run's own revision back, so any tree could claim.
    other = tmp_path / "other-checkout"
    (other / "src").mkdir(parents=True)
    (other / "src" / "app.py").write_text("def answer() -> int:\n    return 41\n")
    commit_tree(other)
    journal = admitted.journal()
    outcome = admitted.run(provider, source_dir=other)
    assert outcome.exit_code == EXIT_NOTHING_TO_RUN
    assert "ClaimExecutionRequest: CLAIM_CHECK_FAILED" in outcome.message
    assert provider.received == []
    assert admitted.journal() == journal
    # the run's own tree claims and completes
    assert admitted.run(provider).exit_code == EXIT_COMPLETED
    claimed = [
        e for e in admitted.journal() if e.kind == common_pb2.JOURNAL_ENTRY_KIND_WORKER_CLAIMED
    ]
    assert len(claimed) == 1
    # the claim carries the digest of the worker's installed code, computed as the services
    # compute it; the ledger compared it with the qualified digest and recorded it (ADR 0045)
    (entry,) = claimed
    assert json.loads(entry.payload_json)["profile_digest"] == installed_profile().digest
