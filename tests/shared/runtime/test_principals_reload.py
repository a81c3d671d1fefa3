"""Roles without restarts: a running service follows its principals file, so a role removed or
granted holds within FORGE_PRINCIPALS_RELOAD_SECONDS, for authentication and the ledger's
authority alike (one PrincipalsFile); a file that does not parse keeps the last good one."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from forge.continuity.v1 import policy_pb2, policy_pb2_grpc
from services.ledger.database import migrate
from shared.runtime.auth import PrincipalsFile, token_digest
from shared.runtime.config import load_settings
from tests.polyglot.process import LedgerProcess, running_ledger
from tests.support import principals_document

RELOAD_SECONDS = 0.5
# The bound under test is RELOAD_SECONDS; the wait allows a loaded machine to schedule the call.
WAIT_SECONDS = 20.0


def _write(path: Path, document: object) -> None:
    """Replace the file as a Kubernetes Secret volume does: a new file moved into place."""
    fresh = path.with_suffix(".new")
    fresh.write_text(json.dumps(document) if not isinstance(document, str) else document)
    os.replace(fresh, path)


def _with_roles(identity: str, roles: list[str]) -> dict[str, object]:
    document = principals_document()
    entries = document["principals"]
    assert isinstance(entries, list)
    for entry in entries:
        if entry["identity"] == identity:
            entry["roles"] = roles
    return document


def _read_policy(ledger: LedgerProcess) -> grpc.StatusCode:
    with ledger.channel("reader-token") as channel:
        try:
            policy_pb2_grpc.PolicyServiceStub(channel).GetPolicy(
                policy_pb2.GetPolicyRequest(), timeout=5
            )
        except grpc.RpcError as error:
            return error.code()  # type: ignore[attr-defined,no-any-return]
    return grpc.StatusCode.OK


def _eventually(condition: Callable[[], bool], what: str, ledger: LedgerProcess) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {WAIT_SECONDS:.0f}s:\n{ledger.log()}")
        time.sleep(0.05)


def test_a_removed_role_is_refused_and_a_granted_one_allowed_without_a_restart(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/continuity.db"
    migrate(url)
    env = {"FORGE_PRINCIPALS_RELOAD_SECONDS": str(RELOAD_SECONDS)}
    with running_ledger(url, tmp_path, env=env) as ledger:
        principals = tmp_path / "principals.json"
        pid = ledger.process.pid
        assert _read_policy(ledger) == grpc.StatusCode.OK

        _write(principals, _with_roles("rita-reader", []))
        _eventually(
            lambda: _read_policy(ledger) == grpc.StatusCode.PERMISSION_DENIED,
            "the removed role refused",
            ledger,
        )
        # A file that does not parse is not applied: the last good one (no role) stays.
        _write(principals, "{not json")
        _eventually(
            lambda: (
                _read_policy(ledger) == grpc.StatusCode.PERMISSION_DENIED
                and "refused, keeping the last good" in ledger.log()
            ),
            "the bad file logged and not applied",
            ledger,
        )

        _write(principals, _with_roles("rita-reader", ["reader"]))
        _eventually(
            lambda: _read_policy(ledger) == grpc.StatusCode.OK, "the role granted again", ledger
        )
        assert ledger.process.pid == pid and ledger.process.poll() is None


def test_authentication_and_authority_read_one_file_within_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "principals.json"
    _write(path, principals_document())
    now = [0.0]
    principals = PrincipalsFile(path, interval=2.0, clock=lambda: now[0])
    assert "reader" in principals.role_names("rita-reader")

    _write(path, _with_roles("rita-reader", []))
    now[0] = 1.9  # inside the bound the content in force may still be the old one
    assert "reader" in principals.role_names("rita-reader")
    now[0] = 2.0  # at the bound it is the new one, for authority and authentication alike
    assert principals.role_names("rita-reader") == frozenset()
    assert principals.authenticate(f"Bearer {'reader-token'}").roles == frozenset()

    # A token removed from the file stops authenticating.
    document = principals_document()
    entries = document["principals"]
    assert isinstance(entries, list)
    document["principals"] = [
        e for e in entries if e["token_sha256"] != token_digest("reader-token")
    ]
    _write(path, document)
    now[0] = 4.0
    with pytest.raises(Exception, match="not recognised"):
        principals.authenticate("Bearer reader-token")


def test_the_first_load_must_succeed_and_the_bound_is_a_setting(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        PrincipalsFile(tmp_path / "missing.json")
    assert load_settings("ledger", env={}).principals_reload_seconds == 2.0
    settings = load_settings("ledger", env={"FORGE_PRINCIPALS_RELOAD_SECONDS": "0.5"})
    assert settings.principals_reload_seconds == 0.5
    with pytest.raises(ValueError, match="FORGE_PRINCIPALS_RELOAD_SECONDS"):
        load_settings("ledger", env={"FORGE_PRINCIPALS_RELOAD_SECONDS": "0"})
