"""The operator flow through the client and the CLI against the four real services (ledger,
reconstruction, candidate, admission) on SQLite and PostgreSQL: policy, candidate, submit, lost
response read-back, identical resubmission, conflicts, stale digests and held candidates."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from forge.continuity.v1 import common_pb2
from services.admission.servicer import bindings as admission_bindings
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings as candidate_bindings
from services.client import ContinuityClient
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.contract.channels import open_channel
from shared.runtime.errors import (
    Conflict,
    DomainError,
    FailedPrecondition,
    NotFound,
    Unavailable,
    Unimplemented,
)
from tests.client.conftest import CliResult, CliRunner, lines, seed
from tests.support import Served, admission_downstream, serve

ACKS = (
    "--acknowledge-no-new-grant",
    "--acknowledge-original-consumption",
    "--acknowledge-renewed-same-attempt-lease",
)


@dataclass
class Stack:
    ledger: Served
    candidate: Served
    admission: Served

    def client(self, token: str) -> ContinuityClient:
        return ContinuityClient(
            token,
            ledger_target=self.ledger.target,
            candidate_target=self.candidate.target,
            admission_target=self.admission.target,
            timeout=30.0,
        )

    def cli(self, run: CliRunner, *argv: str, token: str = "operator-token") -> CliResult:
        return run(
            *argv,
            token=token,
            ledger=self.ledger.target,
            candidate=self.candidate.target,
            admission=self.admission.target,
        )


@pytest.fixture
def stack(ledger: Ledger) -> Iterator[Stack]:
    with (
        serve("ledger", ledger_bindings(ledger)) as ledger_served,
        serve("reconstruction", reconstruction_bindings()) as reconstruction,
    ):
        ledger_channel = open_channel(ledger_served.target, "service-token")
        reconstruction_channel = open_channel(reconstruction.target, "candidate-service-token")
        sources = GrpcCandidateSources(ledger_channel, reconstruction_channel)
        with serve("candidate", candidate_bindings(sources)) as candidate:
            downstream = admission_downstream(ledger_served.target, candidate.target)
            with serve("admission", admission_bindings(downstream)) as admission:
                yield Stack(ledger_served, candidate, admission)
        ledger_channel.close()
        reconstruction_channel.close()


def fields(output: str) -> dict[str, str]:
    """The ``key: value`` lines of a text output (first occurrence of each key)."""
    found: dict[str, str] = {}
    for line in lines(output):
        key, separator, value = line.partition(":")
        if separator and not line.startswith(" "):
            found.setdefault(key, value.strip())
    return found


def test_the_operator_flow_through_the_cli_and_client(stack: Stack, cli: CliRunner) -> None:
    seeded = seed(stack.ledger)

    # 1. A factory administrator enables the policy.
    enabled = stack.cli(
        cli,
        "policy",
        "set",
        "--expected-revision",
        "1",
        "--enable",
        "--window-seconds",
        "3600",
        token="admin-token",
    )
    assert (enabled.code, enabled.err) == (0, "")

    # 2. The operator reads the candidate: eligible, no holds, its digests.
    shown = stack.cli(cli, "candidate", "show", "run-1")
    assert (shown.code, shown.err) == (0, "")
    candidate_fields = fields(shown.out)
    assert candidate_fields["eligible"] == "true"
    assert candidate_fields["version"] == "1"
    assert candidate_fields["policy_revision"] == "2"
    assert candidate_fields["journal_digest"] == seeded.head_hash
    assert "holds: none" in shown.out
    assert "handoff:" in shown.out and "commands:" in shown.out
    as_json = json.loads(stack.cli(cli, "--json", "candidate", "show", "run-1").out)["candidate"]
    assert as_json["eligible"] is True
    assert as_json["holds"] == []
    assert as_json["digests"]["candidate_digest"] == candidate_fields["candidate_digest"]

    # 3. Submit with the candidate's exact digests.
    submit = ("request", "submit", "run-1", "req-1", "--valid-for-seconds", "1800", *ACKS)
    reviewed = ("--from-candidate", "--candidate-digest", candidate_fields["candidate_digest"])
    submitted = stack.cli(cli, *submit, *reviewed)
    assert (submitted.code, submitted.err) == (0, "")
    ticket_fields = fields(submitted.out)
    assert ticket_fields["created"] == "true"
    assert ticket_fields["operator_identity"] == "olga-operator"
    assert ticket_fields["execution_state"] == "QUEUED"
    assert ticket_fields["lease_seconds"] == "900"  # bounded by the frozen provider timeout
    # ... and the answer says so: 1800 s asked, 900 s granted, and which bound won.
    assert ticket_fields["lease_bounds"].startswith(
        "900 s, bounded by the run's provider timeout (requested 1800 s, policy window "
    )
    assert ticket_fields["candidate_digest"] == candidate_fields["candidate_digest"]

    # 4. After a lost response: read it back (any role), and resubmit identically.
    with stack.client("reader-token") as reader:
        ticket = reader.invalid_read_continuity("run-1", "req-1")
    assert ticket.execution_request.execution_request_id == ticket_fields["execution_request_id"]
    assert ticket.digests.candidate_digest == candidate_fields["candidate_digest"]
    shown_back = stack.cli(cli, "request", "show", "run-1", "req-1", token="reader-token")
    assert shown_back.code == 0
    assert fields(shown_back.out) == {k: v for k, v in ticket_fields.items() if k != "created"}

    retried = stack.cli(cli, *submit, *reviewed, "--json")
    assert retried.code == 0, retried.err
    document = json.loads(retried.out)
    assert document["created"] is False
    assert document["ticket"]["lease_bounds"]["limited_by"] == "LEASE_BOUND_PROVIDER_TIMEOUT"
    assert (
        document["ticket"]["execution_request"]["execution_request_id"]
        == (ticket_fields["execution_request_id"])
    )

    with stack.client("operator-token") as operator:
        again = operator.request_invalid_read_continuity(
            "run-1",
            "req-1",
            digests=ticket.digests,
            version=1,
            valid_for_seconds=1800,
            acknowledge_no_new_grant=True,
            acknowledge_original_consumption=True,
            acknowledge_renewed_same_attempt_lease=True,
        )
        assert again.created is False
        assert again.ticket == ticket

        # Same request id, different content: a conflict, typed, with its reason.
        with pytest.raises(Conflict) as conflict:
            operator.request_invalid_read_continuity(
                "run-1",
                "req-1",
                digests=ticket.digests,
                version=1,
                valid_for_seconds=900,
                acknowledge_no_new_grant=True,
                acknowledge_original_consumption=True,
                acknowledge_renewed_same_attempt_lease=True,
            )
        assert conflict.value.reason == "REQUEST_ID_CONFLICT"
        assert conflict.value.metadata["request_id"] == "req-1"

    # Another identity can never obtain a second ticket for the same consumed graph.
    with stack.client("operator2-token") as other:
        with pytest.raises(Conflict):
            other.request_invalid_read_continuity(
                "run-1",
                "req-1",
                digests=ticket.digests,
                version=1,
                valid_for_seconds=1800,
                acknowledge_no_new_grant=True,
                acknowledge_original_consumption=True,
                acknowledge_renewed_same_attempt_lease=True,
            )
        with pytest.raises(FailedPrecondition) as moved:
            other.request_invalid_read_continuity(
                "run-1",
                "req-2",
                digests=ticket.digests,
                version=1,
                valid_for_seconds=1800,
                acknowledge_no_new_grant=True,
                acknowledge_original_consumption=True,
                acknowledge_renewed_same_attempt_lease=True,
            )
        assert moved.value.precondition_violations

    # The journal shows the settlement and its adjacent claim; command usage is unchanged.
    journal = stack.cli(cli, "journal", "show", "run-1", token="reader-token")
    rows = [row.split() for row in lines(journal.out)[1:]]
    assert [row[1] for row in rows[-2:]] == ["MIGRATION_SETTLEMENT", "OWNERSHIP_CLAIM"]
    assert {row[2] for row in rows[-2:]} == {"olga-operator"}
    assert [int(row[0]) for row in rows[-2:]] == [
        int(ticket_fields["settlement_sequence"]),
        int(ticket_fields["claim_sequence"]),
    ]
    assert stack.cli(cli, "journal", "verify", "run-1", token="reader-token").code == 0
    usage = stack.cli(cli, "commands", "run-1", token="reader-token")
    assert fields(usage.out) == {"used": "11", "limit": "22", "remaining": "11"}


def test_stale_digests_are_refused_naming_each_one(stack: Stack, cli: CliRunner) -> None:
    seed(stack.ledger)
    with stack.client("admin-token") as admin:
        admin.put_policy(1, enabled=True, window_seconds=3600)
    with stack.client("operator-token") as operator:
        current = operator.invalid_read_continuity_candidate("run-1").digests
    result = stack.cli(
        cli,
        "request",
        "submit",
        "run-1",
        "req-1",
        "--valid-for-seconds",
        "600",
        *ACKS,
        "--candidate-digest",
        "sha256:" + "0" * 64,
        "--run-digest",
        current.run_digest,
        "--journal-digest",
        current.journal_digest,
        "--policy-digest",
        "sha256:" + "1" * 64,
    )
    assert (result.code, result.out) == (1, "")
    assert result.err.startswith("error: FAILED_PRECONDITION CANDIDATE_DIGEST_STALE: ")
    assert "precondition violations:" in result.err
    assert "    DIGEST candidate_digest: " in result.err
    assert "    DIGEST policy_digest: " in result.err
    assert "run_digest: submitted" not in result.err
    with stack.client("reader-token") as reader:
        assert reader.journal("run-1")[-1].kind == common_pb2.JOURNAL_ENTRY_KIND_RUN_HELD


def test_a_held_candidate_lists_each_hold_with_its_requirement(
    stack: Stack, cli: CliRunner
) -> None:
    seed(stack.ledger)  # the policy is disabled by default
    shown = stack.cli(cli, "candidate", "show", "run-1")
    assert shown.code == 0
    assert fields(shown.out)["eligible"] == "false"
    assert "  - POLICY_DISABLED" in shown.out
    hold_line = next(line for line in lines(shown.out) if "- POLICY_DISABLED" in line)
    assert hold_line.endswith("requires POLICY")

    reviewed = json.loads(stack.cli(cli, "--json", "candidate", "show", "run-1").out)["candidate"]
    refused = stack.cli(
        cli,
        "--json",
        "request",
        "submit",
        "run-1",
        "req-1",
        "--valid-for-seconds",
        "600",
        *ACKS,
        "--from-candidate",
        "--candidate-digest",
        reviewed["digests"]["candidate_digest"],
    )
    assert (refused.code, refused.out) == (1, "")
    error = json.loads(refused.err)["error"]
    assert error["code"] == "FAILED_PRECONDITION"
    assert error["reason"] == "CANDIDATE_HELD"
    assert "POLICY_DISABLED" in {v["type"] for v in error["precondition_violations"]}
    # the refusal carries the candidate's handoff: the same payload the candidate showed
    assert error["handoff"] == reviewed["handoff"]
    assert "update_policy" in [a["action"] for a in error["handoff"]["permitted_next_actions"]]


REVIEWED = common_pb2.ReviewedProviderRejectionV1(
    provider_epoch="epoch-1",
    wire_digest="sha256:" + "2" * 64,
    wire_length=1024,
    endpoint="https://provider.invalid/v1",
    principal="forge-worker",
    model="gpt-5.2",
    source_revision="git:4f1c2a9",
    executable_identity="sha256:" + "3" * 64,
    source_validator_report_digest="sha256:" + "4" * 64,
    executable_probe_report_digest="sha256:" + "5" * 64,
)
RECOVERY = {"candidate_digest": "sha256:" + "6" * 64, "valid_for_seconds": 600}
RECOVERY_CALLS: list[tuple[str, str, dict[str, object]]] = [
    ("invalid_read_recovery_candidate", "GetInvalidReadRecoveryCandidate", {}),
    ("invalid_read_recovery", "GetInvalidReadRecovery", {}),
    (
        "request_invalid_read_recovery",
        "RequestInvalidReadRecovery",
        {
            "recovery_id": "rec-1",
            **RECOVERY,
            "acknowledge_never_claimed": True,
            "acknowledge_same_request_and_attempt": True,
            "acknowledge_budgets_charged": True,
            "acknowledge_same_attempt_lease": True,
        },
    ),
    (
        "rejected_boundary_recovery_candidate",
        "GetRejectedBoundaryCandidate",
        {"reviewed_rejection": REVIEWED},
    ),
    ("rejected_boundary_recovery", "GetRejectedBoundaryRecovery", {}),
    (
        "request_rejected_boundary_recovery",
        "RequestRejectedBoundaryRecovery",
        {
            "recovery_id": "rec-1",
            **RECOVERY,
            "reviewed_rejection": REVIEWED,
            "corrective_provider": common_pb2.CorrectiveProviderConfigurationV1(
                provider_epoch="epoch-2", configuration_digest="sha256:" + "7" * 64
            ),
            "acknowledge_reviewed_provider_epoch": True,
            "acknowledge_no_response_or_tool_replay": True,
            "acknowledge_same_request_and_budgets": True,
            "acknowledge_finite_ownership_lease": True,
        },
    ),
    ("readonly_observation_recovery_candidate", "GetReadonlyObservationCandidate", {}),
    ("readonly_observation_recovery", "GetReadonlyObservationRecovery", {}),
    (
        "request_readonly_observation_recovery",
        "RequestReadonlyObservationRecovery",
        {
            "recovery_id": "rec-1",
            **RECOVERY,
            "acknowledge_unavailable_observation": True,
            "acknowledge_no_original_callback_replay": True,
            "acknowledge_same_request_attempt_and_budgets": True,
            "acknowledge_finite_ownership_lease": True,
        },
    ),
]


@pytest.mark.parametrize(("method", "rpc", "arguments"), RECOVERY_CALLS)
def test_each_recovery_wrapper_reaches_its_rpc(
    stack: Stack, method: str, rpc: str, arguments: dict[str, object]
) -> None:
    """No recovery exists for an unknown request, so each call is refused by the service, typed:
    the call left the process and reached a service that knows the RPC."""
    with stack.client("admin-token") as admin, pytest.raises(DomainError) as refused:
        getattr(admin, method)("run-1", "no-such-request", **arguments)
    error = refused.value
    assert not isinstance(error, Unavailable), error
    assert error.metadata.get("origin") != "client", error  # it left the process
    assert not isinstance(error, Unimplemented), (rpc, error)


# --- --from-candidate carries the candidate the operator reviewed -------------------------------

SUBMIT_FROM_CANDIDATE = (
    *("request", "submit", "run-1", "req-1", "--valid-for-seconds", "600"),
    *ACKS,
    "--from-candidate",
)


def shown_candidate_digest(stack: Stack, cli: CliRunner) -> str:
    shown = stack.cli(cli, "--json", "candidate", "show", "run-1")
    assert shown.code == 0, shown.err
    digest: str = json.loads(shown.out)["candidate"]["digests"]["candidate_digest"]
    return digest


def assert_nothing_submitted(stack: Stack) -> None:
    with stack.client("reader-token") as reader:
        with pytest.raises(NotFound) as absent:
            reader.invalid_read_continuity("run-1", "req-1")
        assert absent.value.reason == "ADMISSION_NOT_FOUND"
        assert reader.journal("run-1")[-1].kind == common_pb2.JOURNAL_ENTRY_KIND_RUN_HELD


def test_from_candidate_refuses_when_the_candidate_moved_since_it_was_reviewed(
    stack: Stack, cli: CliRunner
) -> None:
    """The operator reviews the candidate, then the policy changes: the current candidate is not
    the one reviewed, so nothing is submitted; the candidate reviewed afresh is submitted."""
    seed(stack.ledger)
    with stack.client("admin-token") as admin:
        admin.put_policy(1, enabled=True, window_seconds=3600)
    reviewed = shown_candidate_digest(stack, cli)
    with stack.client("admin-token") as admin:
        admin.put_policy(2, enabled=True, window_seconds=1800)

    stale = stack.cli(cli, *SUBMIT_FROM_CANDIDATE, "--candidate-digest", reviewed)
    assert (stale.code, stale.out) == (1, "")
    assert stale.err.startswith("error: FAILED_PRECONDITION CANDIDATE_DIGEST_STALE: ")
    assert "nothing was submitted" in stale.err
    assert f"    DIGEST candidate_digest: reviewed {reviewed}, current sha256:" in stale.err
    assert any(line.split() == ["origin:", "client"] for line in lines(stale.err))
    assert_nothing_submitted(stack)

    as_json = stack.cli(cli, *SUBMIT_FROM_CANDIDATE, "--candidate-digest", reviewed, "--json")
    assert (as_json.code, as_json.out) == (1, "")
    error = json.loads(as_json.err)["error"]
    assert (error["code"], error["reason"]) == ("FAILED_PRECONDITION", "CANDIDATE_DIGEST_STALE")
    assert error["metadata"] == {"origin": "client", "stale": "candidate_digest"}
    assert_nothing_submitted(stack)

    current = shown_candidate_digest(stack, cli)
    assert current != reviewed
    submitted = stack.cli(cli, *SUBMIT_FROM_CANDIDATE, "--candidate-digest", current)
    assert (submitted.code, submitted.err) == (0, "")
    assert fields(submitted.out)["created"] == "true"
    assert fields(submitted.out)["candidate_digest"] == current
    assert fields(submitted.out)["policy_revision"] == "3"


def test_from_candidate_with_a_mismatching_digest_submits_nothing(
    stack: Stack, cli: CliRunner
) -> None:
    seed(stack.ledger)
    with stack.client("admin-token") as admin:
        admin.put_policy(1, enabled=True, window_seconds=3600)
    mismatching = stack.cli(cli, *SUBMIT_FROM_CANDIDATE, "--candidate-digest", "sha256:" + "0" * 64)
    assert (mismatching.code, mismatching.out) == (1, "")
    assert mismatching.err.startswith("error: FAILED_PRECONDITION CANDIDATE_DIGEST_STALE: ")
    assert_nothing_submitted(stack)

    matching = shown_candidate_digest(stack, cli)
    submitted = stack.cli(cli, *SUBMIT_FROM_CANDIDATE, "--candidate-digest", matching)
    assert (submitted.code, submitted.err) == (0, "")
    assert fields(submitted.out)["created"] == "true"
    with stack.client("reader-token") as reader:
        assert reader.invalid_read_continuity("run-1", "req-1").digests.candidate_digest == matching


def test_a_retry_from_candidate_must_name_the_candidate_it_was_admitted_from(
    stack: Stack, cli: CliRunner
) -> None:
    """After admission the candidate moves on; a retry resends the admitted digests only when the
    reviewed candidate digest is the admitted one, else it is refused without a call."""
    seed(stack.ledger)
    with stack.client("admin-token") as admin:
        admin.put_policy(1, enabled=True, window_seconds=3600)
    reviewed = shown_candidate_digest(stack, cli)
    first = stack.cli(cli, *SUBMIT_FROM_CANDIDATE, "--candidate-digest", reviewed)
    assert first.code == 0, first.err

    retried = stack.cli(cli, *SUBMIT_FROM_CANDIDATE, "--candidate-digest", reviewed)
    assert (retried.code, retried.err) == (0, "")
    assert fields(retried.out)["created"].startswith("false")

    other = "sha256:" + "9" * 64
    conflict = stack.cli(cli, *SUBMIT_FROM_CANDIDATE, "--candidate-digest", other)
    assert (conflict.code, conflict.out) == (1, "")
    assert conflict.err.startswith("error: ALREADY_EXISTS REQUEST_ID_CONFLICT: ")
    assert any(line.split() == ["origin:", "client"] for line in lines(conflict.err))
    assert any(
        line.split() == ["admitted_candidate_digest:", reviewed] for line in lines(conflict.err)
    )


def test_whoami_shows_the_callers_roles_and_what_they_permit(stack: Stack, cli: CliRunner) -> None:
    with stack.client("admin-operator-token") as client:
        reply = client.caller_permissions()
    assert reply.identity == "ada-admin-operator"
    permitted = {p.method.rsplit("/", 1)[1] for p in reply.permissions if p.permitted}
    assert {"RequestInvalidReadContinuity", "RequestInvalidReadRecovery"} <= permitted

    shown = stack.cli(cli, "whoami", token="reader-token")
    assert (shown.code, shown.err) == (0, "")
    text = lines(shown.out)
    assert text[:2] == ["identity: rita-reader", "roles:    reader"]
    rows = {line.split()[0]: line.split()[1] for line in text[3:]}
    assert rows["AdmissionService/RequestInvalidReadContinuity"] == "no"
    assert rows["AdmissionService/GetInvalidReadContinuity"] == "yes"
    assert len(rows) == len(reply.permissions)

    as_json = stack.cli(cli, "--json", "whoami", token="operator-token")
    document = json.loads(as_json.out)
    assert document["identity"] == "olga-operator"
    assert document["roles"] == ["ROLE_EXECUTION_OPERATOR"]
    decided = {p["method"].rsplit("/", 1)[1]: p["permitted"] for p in document["permissions"]}
    assert decided["RequestInvalidReadContinuity"] is True
    assert decided["RequestInvalidReadRecovery"] is False


def test_the_operator_lists_and_cancels_the_admitted_request(stack: Stack, cli: CliRunner) -> None:
    """The CLI names each request's state and scheduling eligibility; the operator who admitted
    the request cancels it, and the ticket read-back names the chain's current member."""
    seed(stack.ledger)
    with stack.client("admin-token") as admin:
        admin.put_policy(1, enabled=True, window_seconds=3600)
    reviewed = shown_candidate_digest(stack, cli)
    assert stack.cli(cli, *SUBMIT_FROM_CANDIDATE, "--candidate-digest", reviewed).code == 0
    with stack.client("reader-token") as reader:
        [queued] = reader.execution_requests("run-1")
    listed = stack.cli(cli, "requests", "list", "run-1")
    assert listed.code == 0, listed.err
    assert [line.split() for line in lines(listed.out)][1] == [
        queued.execution_request_id,
        "req-1",
        "queued",
        "0",
        "-",
        "eligible",
    ]
    refused = stack.cli(
        cli,
        "requests",
        "cancel",
        queued.execution_request_id,
        "--reason",
        "x",
        token="operator2-token",
    )
    assert (refused.code, refused.out) == (1, "")
    assert refused.err.startswith("error: PERMISSION_DENIED CANCEL_NOT_PERMITTED: ")
    cancelled = stack.cli(
        cli, "requests", "cancel", queued.execution_request_id, "--reason", "not needed"
    )
    assert (cancelled.code, fields(cancelled.out)["state"]) == (0, "cancelled")
    ticket = stack.cli(cli, "request", "show", "run-1", "req-1")
    assert fields(ticket.out)["current_state"] == "cancelled"
    assert fields(ticket.out)["current_execution_request_id"] == queued.execution_request_id
