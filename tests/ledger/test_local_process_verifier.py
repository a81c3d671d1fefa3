"""The local-process reconciliation verifier against real processes of this host: it proves
cessation of exactly the recorded owner instance and classifies effects from the journal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from services.ledger.domain.execution import ExecutionRequestRecord, RequestState
from services.ledger.domain.journal import StoredEntry
from services.ledger.domain.reconciliation import build_snapshot
from services.ledger.domain.verifier import (
    RefusingVerifier,
    VerificationProof,
    VerificationSubject,
    load_verifier,
)
from services.ledger.local_process_verifier import LocalProcessVerifier
from shared.runtime.host_process import boot_id, hides_processes, pid_namespace, process_stat

EXR = "exr_lost"
RECORD = ExecutionRequestRecord(
    execution_request_id=EXR,
    run_id="run-1",
    attempt_id="attempt-1",
    request_id="req-1",
    checkpoint_digest="sha256:" + "a" * 64,
    policy_revision=2,
    state=RequestState.CLAIMED,
    lease_generation=1,
    lease_seconds=900,
    lease_expires_at="2026-12-01T12:15:00.000000Z",
    owner="wanda-worker",
    created_at="2026-12-01T12:00:00.000000Z",
    updated_at="2026-12-01T12:00:00.000000Z",
)


#: Above the kernel's largest pid (2**22): no process ever holds it.
NO_SUCH_PID = 2**22 + 17


def owner_of(source: int, **changes: Any) -> dict[str, Any]:
    """The owner instance process ``source`` would record, with ``changes`` (None drops one)."""
    stat = process_stat(source)
    assert stat is not None
    owner = {
        "host_boot_id": boot_id(),
        "pid": source,
        "process_start_ticks": stat.start_ticks,
        "pid_namespace": pid_namespace(),
    }
    owner.update(changes)
    return {k: v for k, v in owner.items() if v is not None}


def entries(
    owner: dict[str, Any] | None, *effects: tuple[str, dict[str, Any]]
) -> list[StoredEntry]:
    claim = {"execution_request_id": EXR, "lease_generation": 1, "attempt_id": "attempt-1"}
    if owner is not None:
        claim["owner_instance"] = owner
    rows = [("worker_claimed", claim)] + [
        (kind, {**payload, "execution_request_id": EXR, "lease_generation": 1})
        for kind, payload in effects
    ]
    return [
        StoredEntry("run-1", n, kind, json.dumps(payload), "", f"h{n}", "wanda-worker", "")
        for n, (kind, payload) in enumerate(rows, start=30)
    ]


def verify(rows: Sequence[StoredEntry], command_limit: int = 22) -> VerificationProof:
    snapshot = build_snapshot(
        RECORD,
        [RECORD],
        rows,
        command_limit=command_limit,
        deadline_remaining_seconds=-1,
        reconciliation_id="rcn-1",
    )
    return LocalProcessVerifier().verify(VerificationSubject(snapshot, "incident-1", "ada"))


@pytest.fixture
def process() -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield child
    child.kill()
    child.wait()


def test_a_live_owner_is_not_ceased_and_a_killed_one_is(
    process: subprocess.Popen[bytes],
) -> None:
    rows = entries(owner_of(process.pid))
    alive = verify(rows)
    assert not alive.cessation_verified and not alive.complete
    assert "still running" in alive.detail
    process.kill()
    process.wait()
    gone = verify(rows)
    assert gone.cessation_verified and gone.complete
    assert (gone.effect, gone.exposure_within_reservation) == ("no_effect", True)
    assert f"no process {process.pid}" in gone.detail


def test_an_exited_owner_not_yet_reaped_has_ceased(process: subprocess.Popen[bytes]) -> None:
    rows = entries(owner_of(process.pid))
    process.kill()  # not waited for: a zombie until reaped
    deadline = time.monotonic() + 10
    while (stat := process_stat(process.pid)) is not None and not stat.ended:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proof = verify(rows)
    assert proof.cessation_verified, proof.detail


def test_a_reused_pid_with_another_start_time_is_not_the_owner(
    process: subprocess.Popen[bytes],
) -> None:
    """The live process holds the recorded pid but started at another time: the recorded owner
    (which held the pid before it) has ceased, and the live process does not stop that proof."""
    started = owner_of(process.pid)["process_start_ticks"]
    proof = verify(entries(owner_of(process.pid, process_start_ticks=started - 1)))
    assert proof.cessation_verified and proof.complete
    assert "names another process" in proof.detail


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"host_boot_id": "0e0e0e0e-0000-4000-8000-000000000000"}, "another host or an earlier"),
        ({"pid_namespace": None}, "no pid namespace"),
        ({"pid_namespace": 1}, "cannot be observed from here"),
    ],
)
def test_an_owner_this_host_cannot_observe_proves_nothing(
    changes: dict[str, Any], why: str
) -> None:
    # no process holds the pid: a verifier that looked it up anyway would "prove" cessation
    proof = verify(entries(owner_of(os.getpid(), pid=NO_SUCH_PID, **changes)))
    assert not proof.cessation_verified and why in proof.detail


def test_a_claim_without_an_owner_instance_proves_nothing() -> None:
    proof = verify(entries(None))
    assert not proof.cessation_verified and "recorded no owner instance" in proof.detail


def _intent(call: str, tool: str, grant: str) -> tuple[str, dict[str, Any]]:
    return "tool_intent", {"call_id": call, "tool_name": tool, "grant": grant}


def _outcome(call: str, status: str) -> tuple[str, dict[str, Any]]:
    return "tool_outcome", {"call_id": call, "status": status}


@pytest.mark.parametrize(
    ("effects", "effect", "within"),
    [
        ([_intent("c1", "list_files", "read"), _outcome("c1", "succeeded")], "no_effect", True),
        (
            [_intent("c1", "list_files", "read"), _intent("c2", "read_file", "read")],
            "retry_safe",
            True,
        ),
        (
            [
                _intent("c1", "run_command", "command"),
                ("command_executed", {"command_id": "exr_lost.c1"}),
                _outcome("c1", "failed"),
                _intent("c2", "list_files", "read"),
            ],
            "retry_safe",
            True,
        ),
        (
            [_intent("c1", "list_files", "read"), _intent("c2", "run_command", "command")],
            "unknown",
            True,
        ),
        ([_intent("c1", "list_files", "read"), _outcome("c1", "unknown")], "retry_safe", False),
        ([_intent("c1", "mystery_tool", "")], "unknown", True),
    ],
)
def test_effects_are_classified_from_the_journal(
    effects: list[tuple[str, dict[str, Any]]], effect: str, within: bool
) -> None:
    owner = owner_of(os.getpid(), pid=NO_SUCH_PID)  # ceased
    proof = verify(entries(owner, *effects))
    assert proof.cessation_verified
    assert (proof.effect, proof.exposure_within_reservation) == (effect, within), proof.detail
    assert proof.complete == (effect != "unknown" and within)


def test_the_ledger_loads_the_built_in_verifiers_by_name() -> None:
    assert isinstance(load_verifier("local-process"), LocalProcessVerifier)
    assert isinstance(load_verifier("refusing"), RefusingVerifier)
    assert isinstance(load_verifier(""), RefusingVerifier)
    with pytest.raises(ValueError, match=r"package\.module:attribute"):
        load_verifier("no-such-verifier")


def test_a_malformed_recorded_owner_proves_nothing() -> None:
    # a pid of 0 names no process: read as "no owner instance", never as a ceased one
    proof = verify(entries(owner_of(os.getpid(), pid=0)))
    assert not proof.cessation_verified and "recorded no owner instance" in proof.detail


@pytest.mark.parametrize(
    ("options", "hides"),
    [
        ("rw", False),
        ("rw,hidepid=0", False),
        ("rw,hidepid=2", True),
        ("rw,hidepid=invisible", True),
    ],
)
def test_a_proc_that_may_hide_processes_proves_no_absence(
    tmp_path: Path, options: str, hides: bool
) -> None:
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "mountinfo").write_text(
        f"21 26 0:20 / /sys rw - sysfs sysfs rw\n22 27 0:21 / {tmp_path} rw - proc proc {options}\n"
    )
    assert hides_processes(tmp_path) is hides
    assert hides_processes(tmp_path / "elsewhere") is True  # unknown: it may hide
