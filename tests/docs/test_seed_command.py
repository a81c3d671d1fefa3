"""`python -m services.demo.seed`, which the README's walkthroughs use to get a held run: it writes
the run once through the ledger's public RPCs, and a second seed under the same id is refused with
a hint, writing nothing more."""

from __future__ import annotations

import pytest

from forge.continuity.v1 import ledger_pb2, ledger_pb2_grpc
from services.demo import seed
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from tests.support import serve


def test_the_seed_command_writes_a_held_run_once(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve("ledger", bindings(ledger)) as served:
        arguments = ["--ledger", served.target, "--token", "writer-token", "run-seed-1"]
        assert seed.main(arguments) == 0
        printed = capsys.readouterr().out
        reader = ledger_pb2_grpc.LedgerServiceStub(served.channel("reader-token"))
        answer = reader.GetRun(ledger_pb2.GetRunRequest(run_id="run-seed-1"))
        assert answer.run.attempt_id == "run-seed-1-attempt-1"
        assert printed == (
            f"seeded held run run-seed-1: attempt run-seed-1-attempt-1, "
            f"{answer.head.sequence} journal entries, head {answer.head.hash}\n"
        )

        assert seed.main(arguments) == 1
        refused = capsys.readouterr()
        assert refused.out == ""
        assert "error: ABORTED JOURNAL_HEAD_STALE" in refused.err
        assert "run-seed-1 was written before: choose another RUN_ID" in refused.err
        again = reader.GetRun(ledger_pb2.GetRunRequest(run_id="run-seed-1"))
        assert again.head == answer.head


def test_the_seed_command_needs_a_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("FORGE_TOKEN", raising=False)
    with pytest.raises(SystemExit) as usage:
        seed.main(["run-seed-2"])
    assert usage.value.code == 2
    assert "no token: pass --token or set FORGE_TOKEN" in capsys.readouterr().err
