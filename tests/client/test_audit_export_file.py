"""The export writes its bundle beside the target and renames it into place; the temporary file
is one the export itself creates, so a symlink planted at its name cannot redirect the write."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge_audit.verify import verify_file
from tests.client.conftest import ClientFactory, CliRunner, seed
from tests.support import Served

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
def test_a_symlink_planted_at_the_partial_path_is_not_followed(
    client_for: ClientFactory, ledger_served: Served, tmp_path: Path, dangling: bool
) -> None:
    seed(ledger_served)
    victim = tmp_path / "victim.txt"
    if not dangling:
        victim.write_bytes(b"precious\n")
    target = tmp_path / "run-1.audit.jsonl"
    partial = tmp_path / "run-1.audit.jsonl.partial"
    partial.symlink_to(victim)
    with pytest.raises(FileExistsError, match="partial"):
        client_for("reader-token").export_journal("run-1", target)
    # nothing written through the link, nothing published, the link left as it was found
    assert victim.read_bytes() == b"precious\n" if not dangling else not victim.exists()
    assert not target.exists()
    assert partial.is_symlink() and partial.readlink() == victim
    # once it is gone the export writes its own file and renames it into place
    partial.unlink()
    summary = client_for("reader-token").export_journal("run-1", target)
    assert summary.path == str(target) and not partial.exists()
    assert verify_file(target, allow_unsigned_head=True).entries == summary.head_sequence


def test_the_cli_reports_a_partial_file_in_the_way_as_a_usage_error(
    cli: CliRunner, ledger_served: Served, tmp_path: Path
) -> None:
    seed(ledger_served)
    target = tmp_path / "run-1.audit.jsonl"
    (tmp_path / "run-1.audit.jsonl.partial").symlink_to(tmp_path / "elsewhere")
    done = cli(
        "journal",
        "export",
        "run-1",
        "--out",
        str(target),
        token="reader-token",
        ledger=ledger_served.target,
    )
    assert done.code == 2, done
    assert "run-1.audit.jsonl.partial" in done.err and "Traceback" not in done.err
    assert not (tmp_path / "elsewhere").exists() and not target.exists()
