"""``heads watch`` and ``signing-keys export`` (issue 43 §2, ADR 0015): the monitor records
every new head, and raises an alarm, recording nothing, when the ledger shows a run's head behind
one it witnessed (rollback), beside it (fork), or signed by no pinned key."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import audit_pb2
from services.client.cli import main as cli_main
from services.client.heads import Alarm, HeadsFile
from services.ledger.domain.signing import HeadSigner
from shared.continuity.timeutil import to_text
from tests.attacker import delete_signatures, rewrite_from, sign_head_with, truncate
from tests.ledger.test_head_tampering import ledger_with, signed_run
from tests.ledger.test_signed_heads import append


def run_cli(target: str, *arguments: str) -> int:
    return cli_main(["--token", "reader-token", "--ledger", target, *arguments], env={})


def test_the_monitor_records_heads_and_raises_alarms(
    engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    signer, attacker = HeadSigner.generate(), HeadSigner.generate()
    heads, keys = tmp_path / "heads.jsonl", tmp_path / "keys.json"
    with ledger_with(engine, signer) as clients:
        target = clients.served.target
        head = signed_run(clients, entries=3)
        assert run_cli(target, "signing-keys", "export", "--out", str(keys)) == 0
        watch = ("heads", "watch", "--once", "--out", str(heads), "--trusted-key", str(keys))
        assert run_cli(target, *watch) == 0
        append(clients, "run-1", head, "call-3")
        assert run_cli(target, *watch) == 0
        recorded = [json.loads(line) for line in heads.read_text().splitlines()]
        assert [(h["run_id"], h["sequence"]) for h in recorded] == [("run-1", 3), ("run-1", 4)]
        assert recorded[1]["previous"]["sequence"] == 3
        capsys.readouterr()

        # rollback: the newest entries and their signatures removed
        truncate(engine, "run-1", keep=2)
        delete_signatures(engine, "run-1", from_sequence=3)
        assert run_cli(target, *watch) == 1
        assert "ALARM rollback run run-1: witnessed head 4" in capsys.readouterr().err
        # a history rewritten from genesis and re-signed by the attacker's key
        rewrite_from(engine, "run-1", 1)
        sign_head_with(engine, attacker, "run-1", to_text(datetime.now(UTC)))
        assert run_cli(target, "heads", "watch", "--once", "--out", str(heads)) == 1
        assert "ALARM rollback run run-1" in capsys.readouterr().err
        # with the pinned keys the forged signature itself is the alarm
        assert run_cli(target, *watch) == 1
        assert "ALARM unverified run run-1" in capsys.readouterr().err
        assert len(heads.read_text().splitlines()) == 2  # nothing recorded after the attack


def test_a_head_beside_a_witnessed_one_is_a_fork(tmp_path: Path) -> None:
    heads = HeadsFile(tmp_path / "heads.jsonl")
    seen = audit_pb2.SignedHead(run_id="run-1", sequence=4, head_hash="sha256:" + "a" * 64)
    assert heads.judge(seen) is True
    heads.newest["run-1"] = (4, seen.head_hash)
    assert heads.judge(seen) is False
    beside = audit_pb2.SignedHead(run_id="run-1", sequence=4, head_hash="sha256:" + "b" * 64)
    alarm = heads.judge(beside)
    assert isinstance(alarm, Alarm) and alarm.problem == "fork"
    assert alarm.line().startswith("ALARM fork run run-1: witnessed head 4 sha256:aaaa")
