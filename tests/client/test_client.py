"""The Python client against the real ledger process, on SQLite and PostgreSQL: policy, journal,
command usage, and typed refusals carrying their details."""

from __future__ import annotations

import pytest

from forge.continuity.v1 import common_pb2
from services.client import ContinuityClient
from services.client import ledger as ledger_module
from shared.runtime.config import DEFAULT_PORTS
from shared.runtime.errors import (
    Aborted,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from tests.client.conftest import ClientFactory, seed
from tests.support import Served


def test_policy_read_write_and_history(client_for: ClientFactory) -> None:
    admin = client_for("admin-token")
    reader = client_for("reader-token")

    initial = reader.get_policy()
    assert isinstance(initial, common_pb2.Policy)
    assert (initial.revision, initial.enabled, initial.updated_by) == (1, False, "system")

    written = admin.put_policy(
        initial.revision,
        enabled=True,
        window_seconds=3600,
        per_run_ticket_limit=10,
        allow_unavailable_source_observations=True,
    )
    assert written.revision == 2
    assert written.enabled and written.window_seconds == 3600
    assert written.per_run_ticket_limit == 10
    assert written.pending_ticket_limit == 500  # 0 keeps the default
    assert written.allow_unavailable_source_observations
    assert not written.allow_pre_admission_recovery
    assert not written.allow_readonly_observation_recovery
    assert written.updated_by == "alice-admin"

    assert reader.get_policy() == written
    assert reader.get_policy(revision=1) == initial
    assert [p.revision for p in reader.policy_revisions()] == [2, 1]


def test_policy_revisions_fetches_every_page(
    client_for: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = client_for("admin-token")
    for revision in range(1, 6):
        admin.put_policy(revision, enabled=revision % 2 == 1, window_seconds=60 * revision)
    monkeypatch.setattr(ledger_module, "_POLICY_PAGE", 2)
    assert [p.revision for p in admin.policy_revisions()] == [6, 5, 4, 3, 2, 1]


def test_put_policy_without_the_administrator_role_is_permission_denied(
    client_for: ClientFactory,
) -> None:
    for token in ("reader-token", "operator-token"):
        with pytest.raises(PermissionDenied) as refused:
            client_for(token).put_policy(1, enabled=True, window_seconds=3600)
        assert refused.value.reason == "ROLE_REQUIRED"
    assert [p.revision for p in client_for("reader-token").policy_revisions()] == [1]


def test_a_stale_expected_revision_is_aborted_with_its_details(client_for: ClientFactory) -> None:
    admin = client_for("admin-token")
    admin.put_policy(1, enabled=True, window_seconds=3600)
    with pytest.raises(Aborted) as stale:
        admin.put_policy(1, enabled=False, window_seconds=600)
    error = stale.value
    assert error.reason == "POLICY_REVISION_STALE"
    assert error.metadata == {"current_revision": "2", "expected_revision": "1"}
    assert [(v.type, v.subject) for v in error.precondition_violations] == [
        ("POLICY_REVISION", "policy")
    ]
    assert admin.get_policy().revision == 2


def test_an_invalid_policy_is_refused_with_field_violations(client_for: ClientFactory) -> None:
    with pytest.raises(InvalidArgument) as refused:
        client_for("admin-token").put_policy(1, enabled=True, window_seconds=7201)
    assert refused.value.field_violations
    assert "settings.window_seconds" in {v.field for v in refused.value.field_violations}


def test_an_unknown_token_is_unauthenticated(client_for: ClientFactory) -> None:
    with pytest.raises(Unauthenticated):
        client_for("no-such-token").get_policy()


def test_journal_verify_and_command_usage_of_a_seeded_run(
    ledger_served: Served, client_for: ClientFactory
) -> None:
    seeded = seed(ledger_served)
    reader = client_for("reader-token")

    entries = reader.journal("run-1")
    assert [(e.sequence, e.hash) for e in entries] == [(e.sequence, e.hash) for e in seeded.entries]
    assert entries[0].kind == common_pb2.JOURNAL_ENTRY_KIND_RUN_STARTED
    assert entries[-1].kind == common_pb2.JOURNAL_ENTRY_KIND_RUN_HELD
    assert {e.actor for e in entries} == {"paul-writer"}
    assert [e.sequence for e in reader.journal("run-1", from_sequence=5)] == list(
        range(5, len(seeded.entries) + 1)
    )

    verified = reader.verify_journal("run-1")
    assert verified.valid
    assert verified.entries_checked == len(seeded.entries)
    assert verified.head.hash == seeded.head_hash

    usage = reader.command_usage("run-1")
    assert (usage.used, usage.limit) == (11, 22)


def test_journal_reads_every_page(
    ledger_served: Served, client_for: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded = seed(ledger_served)
    monkeypatch.setattr(ledger_module, "_JOURNAL_PAGE", 4)
    sequences = [e.sequence for e in client_for("reader-token").journal("run-1", 2)]
    assert sequences == list(range(2, len(seeded.entries) + 1))


def test_an_unknown_run_is_not_found(client_for: ClientFactory) -> None:
    reader = client_for("reader-token")
    for read in (reader.journal, reader.verify_journal, reader.command_usage):
        with pytest.raises(NotFound) as missing:
            read("no-such-run")
        assert missing.value.reason == "RUN_NOT_FOUND"
        assert missing.value.metadata == {"run_id": "no-such-run"}


def test_from_environment_reads_the_token_and_targets(ledger_served: Served) -> None:
    env = {"FORGE_TOKEN": "admin-token", "FORGE_LEDGER_TARGET": ledger_served.target}
    with ContinuityClient.from_environment(env) as client:
        assert client.targets == {
            "ledger": ledger_served.target,
            "candidate": f"127.0.0.1:{DEFAULT_PORTS['candidate']}",
            "admission": f"127.0.0.1:{DEFAULT_PORTS['admission']}",
        }
        assert client.put_policy(1, enabled=True, window_seconds=60).updated_by == "alice-admin"
    with ContinuityClient.from_environment({}) as defaults:
        assert defaults.targets == {
            name: f"127.0.0.1:{DEFAULT_PORTS[name]}"
            for name in ("ledger", "candidate", "admission")
        }
