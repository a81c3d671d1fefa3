"""A typed claim refusal while entering the policy epoch makes the request ineligible for
automatic scheduling (ADR 0014, rule 3a, amended): the reference worker's own selection skips
it once the condition clears, and only an operator naming it schedules it again. Real services
(SQLite and PostgreSQL), the worker in process."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from forge.continuity.v1 import common_pb2
from services.demo.scripted_provider import ScriptedProvider
from services.worker.run import EXIT_COMPLETED, EXIT_NOT_QUALIFIED, EXIT_NOTHING_TO_RUN
from shared.continuity.qualification import PROFILES_FILE_VARIABLE
from tests.admission.conftest import rpc_reason
from tests.support import registry_of_other_migration_code
from tests.worker.conftest import Continuation
from tests.worker.test_ledger_verdicts import claim


def unqualify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry naming other migration code: the installed profile is not qualified."""
    registry = registry_of_other_migration_code(tmp_path, "sha256:" + "cd" * 32)
    monkeypatch.setenv(PROFILES_FILE_VARIABLE, str(registry))


def test_a_refused_request_is_not_picked_again_when_the_condition_clears(
    admitted: Continuation,
    provider: ScriptedProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exr = admitted.ticket.execution_request.execution_request_id
    unqualify(tmp_path, monkeypatch)
    # The reference worker checks its own qualification first and claims nothing (exit 4); a
    # controller of another make, speaking only the contract, claims and the ledger refuses.
    assert admitted.run(provider).exit_code == EXIT_NOT_QUALIFIED
    with pytest.raises(grpc.RpcError) as refused:
        claim(admitted)
    assert rpc_reason(refused.value) == "PROFILE_NOT_QUALIFIED"
    assert admitted.request().admission_refusal == "PROFILE_NOT_QUALIFIED"

    # Qualification restored: the automatic selection still skips the flagged request, and says
    # why; nothing is claimed or sent.
    monkeypatch.delenv(PROFILES_FILE_VARIABLE)
    journal = admitted.journal()
    skipped = admitted.run(provider)
    assert skipped.exit_code == EXIT_NOTHING_TO_RUN, skipped.message
    assert f"{exr} (admission refusal PROFILE_NOT_QUALIFIED" in skipped.message
    assert provider.received == []
    assert admitted.journal() == journal
    assert admitted.request().state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED

    # An operator naming the request schedules it: the claim repeats every check and runs it.
    named = admitted.run(provider, execution_request_id=exr)
    assert named.exit_code == EXIT_COMPLETED, named.message
    # ... and the journal records that this claim scheduled the refused request again
    claimed = admitted.after_claim()[0]
    assert claimed == (
        "worker_claimed",
        {**claimed[1], "admission_refusal": "PROFILE_NOT_QUALIFIED"},
    )
    assert admitted.request().state == common_pb2.EXECUTION_REQUEST_STATE_COMPLETED
