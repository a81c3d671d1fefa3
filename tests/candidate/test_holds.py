"""Every hold, from a historical fixture or a seeded journal variant, with its requirement and
what the handoff then permits."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from sqlalchemy import insert, text

from forge.continuity.v1 import common_pb2, ledger_pb2, ledger_pb2_grpc
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings as candidate_bindings
from services.demo.seed import FIXTURES, Entry, load_fixture
from services.ledger.schema import execution_requests
from services.reconstruction.domain import reconstruct_invalid_read
from shared.continuity.canonical import digest_of, sha256_digest
from shared.continuity.qualification import (
    DEFAULT_QUALIFIED_PROFILE,
    PROFILES_FILE_VARIABLE,
    REGISTRY_FORMAT,
    ProfileDigest,
    installed_profile,
    registration,
)
from shared.contract.channels import open_channel
from tests.candidate.conftest import NOW, Stack, actions, hold_pairs, hold_reasons, requirements
from tests.errors import expect_error
from tests.support import as_database_owner, serve

K = common_pb2.JournalEntryKind
MANIFEST: dict[str, Any] = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))
STRANGER = "sha256:" + "ab" * 32
Edit = Callable[[list[Entry]], list[Entry]]


def change(kind: int, **changes: Any) -> Edit:
    """Replace payload keys of every entry of ``kind`` (a value of None drops the key)."""

    def edit(entries: list[Entry]) -> list[Entry]:
        edited: list[Entry] = []
        for entry_kind, payload in entries:
            if entry_kind == kind:
                merged = {**payload, **changes}
                edited.append((entry_kind, {k: v for k, v in merged.items() if v is not None}))
            else:
                edited.append((entry_kind, payload))
        return edited

    return edit


def drop(kind: int) -> Edit:
    return lambda entries: [(k, p) for k, p in entries if k != kind]


def insert_after_start(kind: int, payload: dict[str, Any]) -> Edit:
    return lambda entries: [entries[0], (kind, payload), *entries[1:]]


# Sequences of the seeded v1_basic journal: 1 run_started, 2..12 commands, 13 checkpoint_stored,
# 14 model_request_sent, 15 response_consumed, 16 tool_call_granted, 17 run_held.
CHECKPOINT = sha256_digest(load_fixture("v1_basic").checkpoint)
VARIANTS: dict[str, tuple[dict[str, Any], set[tuple[str, str]]]] = {
    "consume missing": (
        {"consume": False},
        {
            ("CONSUME_MISSING", "model-request-1"),
            ("UNACCOUNTED_EFFECTS", "15"),
            ("ERROR_MESSAGE_ONLY", "16"),
        },
    ),
    "tool intent after the consume": (
        {"after_consume": [(K.JOURNAL_ENTRY_KIND_TOOL_INTENT, {"call_id": "call_ev_1"})]},
        {("UNACCOUNTED_EFFECTS", "17")},
    ),
    "unknown tool outcome after the consume": (
        {
            "after_consume": [
                (K.JOURNAL_ENTRY_KIND_TOOL_OUTCOME, {"call_id": "call_ev_1", "status": "unknown"})
            ]
        },
        {("UNACCOUNTED_EFFECTS", "17"), ("UNRESOLVED_CUSTODY", "call_ev_1")},
    ),
    "command after the consume": (
        {
            "after_consume": [
                (K.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED, {"command_id": "cmd-12"}),
            ]
        },
        {("UNACCOUNTED_EFFECTS", "17")},
    ),
    "unknown tool outcome earlier in the journal": (
        {
            "edit": insert_after_start(
                K.JOURNAL_ENTRY_KIND_TOOL_OUTCOME, {"call_id": "call_old_1", "status": "unknown"}
            )
        },
        {("UNRESOLVED_CUSTODY", "call_old_1")},
    ),
    "granted call with an intent and no outcome earlier in the journal": (
        {
            "edit": lambda entries: [
                entries[0],
                (
                    K.JOURNAL_ENTRY_KIND_TOOL_CALL_GRANTED,
                    {"call_id": "call_old_2", "tool_name": "list_files"},
                ),
                (K.JOURNAL_ENTRY_KIND_TOOL_INTENT, {"call_id": "call_old_2"}),
                *entries[1:],
            ]
        },
        {("UNRESOLVED_CUSTODY", "call_old_2")},
    ),
    "grant missing": (
        {"edit": drop(K.JOURNAL_ENTRY_KIND_TOOL_CALL_GRANTED)},
        {("CLOSURE_INCOMPLETE", "call_ev_1")},
    ),
    "grant for another tool": (
        {"edit": change(K.JOURNAL_ENTRY_KIND_TOOL_CALL_GRANTED, tool_name="list_files")},
        {("UNACCOUNTED_EFFECTS", "16"), ("CLOSURE_INCOMPLETE", "call_ev_1")},
    ),
    "checkpoint never stored": (
        {"edit": drop(K.JOURNAL_ENTRY_KIND_CHECKPOINT_STORED)},
        {("CLOSURE_INCOMPLETE", CHECKPOINT)},
    ),
    "response blob missing": (
        {"edit": change(K.JOURNAL_ENTRY_KIND_RESPONSE_CONSUMED, response_digest=STRANGER)},
        {("CLOSURE_INCOMPLETE", STRANGER)},
    ),
    "consumption time missing": (
        {"edit": change(K.JOURNAL_ENTRY_KIND_RESPONSE_CONSUMED, consumed_at=None)},
        {("CLOSURE_INCOMPLETE", "15")},
    ),
    "not held": (
        {"edit": drop(K.JOURNAL_ENTRY_KIND_RUN_HELD)},
        {("RUN_NOT_HELD", "16")},
    ),
    "held on a logged error only": (
        {"edit": change(K.JOURNAL_ENTRY_KIND_RUN_HELD, call_id=None)},
        {("ERROR_MESSAGE_ONLY", "17")},
    ),
    "another attempt": (
        {"edit": change(K.JOURNAL_ENTRY_KIND_RUN_STARTED, attempt_id="run-v-attempt-2")},
        {("ATTEMPT_MISMATCH", "1")},
    ),
    "source changed": (
        {"edit": change(K.JOURNAL_ENTRY_KIND_RUN_STARTED, source_revision="git:0000000")},
        {("SOURCE_OR_CONFIGURATION_CHANGED", "source_revision")},
    ),
    "configuration changed": (
        {"edit": change(K.JOURNAL_ENTRY_KIND_RUN_STARTED, configuration_digest=STRANGER)},
        {("SOURCE_OR_CONFIGURATION_CHANGED", "configuration_digest")},
    ),
    "profile not qualified": (
        {"source_profile": "forge-worker/unqualified"},
        {("PROFILE_NOT_QUALIFIED", "forge-worker/unqualified")},
    ),
    "time budget unsupported": (
        {"time_budget_protocol": "wall-clock-v0"},
        {("TIME_BUDGET_UNSUPPORTED", "wall-clock-v0")},
    ),
}
EXPECTED_REQUIREMENTS = {
    "POLICY_DISABLED": "POLICY",
    "JOURNAL_CHAIN_BROKEN": "NOT_ELIGIBLE",
    "CLOSURE_INCOMPLETE": "NOT_ELIGIBLE",
    "CONSUME_MISSING": "NOT_ELIGIBLE",
    "IDENTITY_UNREGISTERED": "QUALIFICATION",
    "QUERY_VALID": "NOT_ELIGIBLE",
    "QUERY_NOT_ADVERTISED": "NOT_ELIGIBLE",
    "SIBLING_CALL": "NOT_ELIGIBLE",
    "UNKNOWN_OR_WRITABLE_CALL": "NOT_ELIGIBLE",
    "UNSUPPORTED_CONTENT": "NOT_ELIGIBLE",
    "UNACCOUNTED_EFFECTS": "CUSTODY",
    "UNRESOLVED_CUSTODY": "CUSTODY",
    "RUN_NOT_HELD": "NOT_ELIGIBLE",
    "ATTEMPT_MISMATCH": "NOT_ELIGIBLE",
    "SOURCE_OR_CONFIGURATION_CHANGED": "SOURCE",
    "PROFILE_NOT_QUALIFIED": "QUALIFICATION",
    "CLAIM_OUTSTANDING": "NOT_ELIGIBLE",
    "MIGRATION_REFUSED": "NOT_ELIGIBLE",
    "ERROR_MESSAGE_ONLY": "NOT_ELIGIBLE",
    "TIME_BUDGET_UNSUPPORTED": "NOT_ELIGIBLE",
}


def _check_requirements(candidate: Any) -> None:
    for reason, requirement in requirements(candidate).items():
        assert requirement == EXPECTED_REQUIREMENTS[reason], reason
    assert all(h.detail for h in candidate.holds)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_seeded_variant_is_held_for_exactly_its_reasons(stack: Stack, variant: str) -> None:
    options, expected = VARIANTS[variant]
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-v", **options)
    candidate = stack.read("run-v")
    assert not candidate.eligible
    assert hold_pairs(candidate) == expected
    _check_requirements(candidate)
    permitted = actions(candidate)
    assert permitted[-1] == "inspect_journal"
    assert "request_invalid_read_continuity" not in permitted
    custody = any(r in ("UNACCOUNTED_EFFECTS", "UNRESOLVED_CUSTODY") for r, _ in expected)
    assert ("reconcile_custody" in permitted) == custody
    assert ("qualify_source_profile" in permitted) == (variant == "profile not qualified")
    blocked = candidate.handoff.remaining_obligations[0].blocked_by
    assert all(reason in blocked for reason, _ in expected)


def test_an_unknown_outcome_is_handed_off_with_every_alternative(stack: Stack) -> None:
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-unknown", **VARIANTS["unknown tool outcome after the consume"][0])
    candidate = stack.read("run-unknown")
    open_calls = {
        u.subject: list(u.alternatives) for u in candidate.handoff.unresolved_alternatives
    }
    assert open_calls == {"call_ev_1": ["failed", "committed", "in_flight"]}
    assert actions(candidate) == ["reconcile_custody", "inspect_journal"]
    assert any(
        o.description == "settle the outcome of tool call call_ev_1"
        for o in candidate.handoff.remaining_obligations
    )


def test_an_earlier_intent_is_held_as_the_handoff_lists_it_and_an_outcome_settles_it(
    stack: Stack,
) -> None:
    """An earlier granted call with a durable intent and no outcome may have taken effect: the
    candidate holds it (as its handoff lists it unresolved); with its outcome it holds nothing."""
    stack.set_policy(enabled=True)
    options = VARIANTS["granted call with an intent and no outcome earlier in the journal"][0]
    stack.seed("v1_basic", "run-open", **options)
    candidate = stack.read("run-open")
    unresolved = {u.subject for u in candidate.handoff.unresolved_alternatives}
    assert {subject for _, subject in hold_pairs(candidate)} == unresolved == {"call_old_2"}

    def settled(entries: list[Entry]) -> list[Entry]:
        outcome = {"call_id": "call_old_2", "status": "succeeded"}
        opened = options["edit"](entries)[:3]
        return [*opened, (K.JOURNAL_ENTRY_KIND_TOOL_OUTCOME, outcome), *entries[1:]]

    stack.seed("v1_basic", "run-settled", edit=settled)
    assert stack.read("run-settled").eligible


def test_a_broken_chain_names_the_first_broken_sequence(stack: Stack) -> None:
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-broken")
    with as_database_owner(stack.engine) as connection:
        connection.execute(
            text(
                "UPDATE journal_entries SET payload_json = :p "
                "WHERE run_id = 'run-broken' AND sequence = 5"
            ),
            {"p": json.dumps({"command_id": "cmd-04", "command_digest": STRANGER})},
        )
    candidate = stack.read("run-broken")
    assert ("JOURNAL_CHAIN_BROKEN", "5") in hold_pairs(candidate)
    assert requirements(candidate)["JOURNAL_CHAIN_BROKEN"] == "NOT_ELIGIBLE"
    assert not candidate.eligible


@pytest.mark.parametrize(
    ("state", "outstanding"),
    [("queued", True), ("claimed", True), ("completed", False), ("failed", False)],
)
def test_a_queued_or_executing_claim_holds_the_candidate(
    stack: Stack, state: str, outstanding: bool
) -> None:
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-claim")
    stamp = "2026-10-20T11:00:00.000000Z"
    with stack.engine.begin() as connection:
        connection.execute(
            insert(execution_requests).values(
                execution_request_id="exr_existing",
                run_id="run-claim",
                attempt_id="run-claim-attempt-1",
                request_id="earlier-request",
                checkpoint_digest=CHECKPOINT,
                policy_revision=1,
                state=state,
                lease_generation=1 if state != "queued" else 0,
                lease_seconds=600,
                lease_expires_at=None,
                owner="wanda-worker" if state != "queued" else "",
                created_at=stamp,
                updated_at=stamp,
            )
        )
    candidate = stack.read("run-claim")
    if outstanding:
        assert hold_pairs(candidate) == {("CLAIM_OUTSTANDING", "exr_existing")}
        assert requirements(candidate) == {"CLAIM_OUTSTANDING": "NOT_ELIGIBLE"}
        assert actions(candidate) == ["read_existing_ticket", "inspect_journal"]
    else:
        assert candidate.eligible


def test_an_admitted_run_is_held_by_its_own_ticket(stack: Stack) -> None:
    """After the ledger's admission transaction the candidate sees the queued claim and the
    settlement entries, and permits reading the existing ticket, not a second submission."""
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-admitted")
    fixture = load_fixture("v1_basic")
    candidate = stack.read("run-admitted")
    derived = reconstruct_invalid_read(
        fixture.checkpoint, fixture.raw_response, 1, fixture.consumed_at
    )
    service = ledger_pb2_grpc.LedgerServiceStub(stack.ledger_served.channel("service-token"))
    service.PutBlob(ledger_pb2.PutBlobRequest(content=derived.derived_checkpoint))
    ticket = service.CommitAdmission(
        ledger_pb2.CommitAdmissionRequest(
            run_id="run-admitted",
            request_id="request-1",
            operator_identity="olga-operator",
            request_content_digest=digest_of({"request": 1}),
            expected_head_hash=candidate.journal_head.hash,
            policy_revision=candidate.policy_revision,
            digests=candidate.digests,
            version=1,
            valid_for_seconds=600,
            derived_checkpoint_digest=derived.derived_checkpoint_digest,
            consumed_response_digest=candidate.proof.consumed_response_digest,
            witness_digest=derived.witness_digest,
        )
    ).ticket
    after = stack.read("run-admitted")
    assert not after.eligible
    pairs = hold_pairs(after)
    assert ("CLAIM_OUTSTANDING", ticket.execution_request.execution_request_id) in pairs
    assert ("RUN_NOT_HELD", str(ticket.claim_sequence)) in pairs
    assert ("UNACCOUNTED_EFFECTS", str(ticket.settlement_sequence)) in pairs
    assert "read_existing_ticket" in actions(after)
    assert "request_invalid_read_continuity" not in actions(after)


# refused fixture → the hold it must produce (the subject is the manifest's element / field).
REFUSED: dict[str, str] = {
    "refused_v1_sibling": "SIBLING_CALL",
    "refused_command_sibling": "UNKNOWN_OR_WRITABLE_CALL",  # a command sibling is writable
    "refused_unknown_call": "UNKNOWN_OR_WRITABLE_CALL",
    "refused_text_content": "UNSUPPORTED_CONTENT",
    "refused_valid_query": "QUERY_VALID",
    "refused_validator_unregistered": "IDENTITY_UNREGISTERED",
    **{
        name: "MIGRATION_REFUSED"
        for name, case in MANIFEST.items()
        if name.startswith("refused_")
        and case["expect"]["reason"].startswith(("MIGRATION_", "CONTRACT_", "SDK_", "CHECKPOINT_"))
    },
}


def test_every_refused_fixture_is_mapped() -> None:
    assert {n for n in MANIFEST if n.startswith("refused_")} == set(REFUSED)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_refused_fixture_is_held_with_the_named_element(stack: Stack, name: str) -> None:
    stack.set_policy(enabled=True)
    stack.seed(name, "run-r")
    candidate = stack.read("run-r")
    metadata = MANIFEST[name]["expect"]["metadata"]
    subject = metadata.get("element") or metadata.get("field")
    assert not candidate.eligible
    assert hold_pairs(candidate) == {(REFUSED[name], subject)}
    _check_requirements(candidate)
    assert MANIFEST[name]["expect"]["reason"] in candidate.holds[0].detail
    assert candidate.version == 0  # no proof could be built
    assert not candidate.proof.derived_checkpoint_digest
    if REFUSED[name] == "IDENTITY_UNREGISTERED":
        assert actions(candidate) == ["qualify_source_profile", "inspect_journal"]
    else:
        assert actions(candidate) == ["inspect_journal"]


@pytest.mark.parametrize("name", ["v1_provenance_unknown", "v1_tool_kind_absent"])
def test_other_eligible_fixtures(stack: Stack, name: str) -> None:
    stack.set_policy(enabled=True)
    stack.seed(name, "run-e")
    candidate = stack.read("run-e")
    assert candidate.eligible, hold_pairs(candidate)
    assert candidate.version == 1


def test_a_v2_list_sibling_is_held_under_version_1(stack: Stack) -> None:
    stack.set_policy(enabled=True)
    stack.seed("v2_list_sibling", "run-v2")
    candidate = stack.read("run-v2")
    assert hold_pairs(candidate) == {("SIBLING_CALL", "call_list_2")}
    assert candidate.version == 0
    assert candidate.proof.call_id == "call_ev_1"
    assert candidate.proof.rejected_by_pinned_validator
    handoff = candidate.handoff
    assert {u.subject: list(u.alternatives) for u in handoff.unresolved_alternatives} == {
        "call_list_2": ["completed_result_not_retained", "not_started"]
    }
    granted = {e.description for e in handoff.known_effects if "granted" in e.description}
    assert granted == {
        "tool call call_ev_1 (read_run_evidence) granted",
        "tool call call_list_2 (list_files) granted",
    }
    assert handoff.consumed_resources.tool_calls == 2
    assert hold_reasons(candidate) == {"SIBLING_CALL"}


def test_an_unavailable_dependency_is_an_error_not_a_hold(stack: Stack) -> None:
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-down")
    ledger_channel = open_channel(stack.ledger_served.target, "service-token")
    dead = open_channel("127.0.0.1:1", "service-token")
    sources = GrpcCandidateSources(ledger_channel, dead)
    try:
        with serve("candidate", candidate_bindings(sources, clock=lambda: NOW)) as served:
            expect_error(
                grpc.StatusCode.UNAVAILABLE,
                "UNAVAILABLE",
                lambda: stack.read("run-down", served=served),
            )
    finally:
        ledger_channel.close()
        dead.close()


def test_a_run_without_a_journal_is_held_not_an_error(stack: Stack) -> None:
    stack.set_policy(enabled=True)
    fixture_run = ledger_pb2.CreateRunRequest(
        run_id="run-empty",
        task_id="run-empty-task",
        attempt_id="run-empty-attempt-1",
        source_revision="git:4f1c2a9",
        configuration_digest=STRANGER,
        provider_timeout_seconds=900,
        command_limit=22,
        time_budget_protocol="provider-timeout-v1",
        source_profile="forge-worker/firefly-agentic-26.10.1/pydantic-ai-2.55.0",
    )
    stack.writer().CreateRun(fixture_run)
    candidate = stack.read("run-empty")
    assert hold_pairs(candidate) == {
        ("RUN_NOT_HELD", "0"),
        ("ATTEMPT_MISMATCH", "run_started"),
        ("CLOSURE_INCOMPLETE", "model_request_sent"),
    }
    assert candidate.journal_head.sequence == 0
    assert candidate.handoff.consumed_resources.commands_used == 0
    assert actions(candidate) == ["inspect_journal"]


def test_a_profile_registered_for_other_code_is_held_naming_the_part(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registered profile digest covers the installed reconstruction code; registered for
    other code, the candidate holds PROFILE_NOT_QUALIFIED and says which part differs."""
    installed = installed_profile()
    registered = ProfileDigest(**{**installed.parts(), "reconstruction_code": STRANGER})
    registry = tmp_path / "profiles.json"
    registry.write_text(json.dumps(registry_document_of(registered)), encoding="utf-8")
    monkeypatch.setenv(PROFILES_FILE_VARIABLE, str(registry))
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-digest")
    candidate = stack.read("run-digest")
    assert hold_reasons(candidate) == {"PROFILE_NOT_QUALIFIED"}
    (held,) = candidate.holds
    assert (
        f"reconstruction code differs (registered {STRANGER}, installed "
        f"{installed.reconstruction_code})" in held.detail
    )
    assert "migration code" not in held.detail and "SDK" not in held.detail
    assert "qualify_source_profile" in actions(candidate)


def registry_document_of(profile: ProfileDigest) -> dict[str, Any]:
    return {
        "format": REGISTRY_FORMAT,
        "profiles": [registration(DEFAULT_QUALIFIED_PROFILE, profile)],
    }
