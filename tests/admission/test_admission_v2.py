"""Version-2 admission (unavailable pure list_files observations) end to end."""

from __future__ import annotations

import grpc
from sqlalchemy import Engine

from forge.continuity.v1 import admission_pb2, candidate_pb2, common_pb2
from services.demo.seed import load_fixture, seed_held_run
from tests.admission.conftest import Stack
from tests.errors import expect_error
from tests.support import row_counts, whole_journal

FIXTURE = load_fixture("v2_list_sibling")
H = common_pb2.HoldReason


def candidate(stack: Stack, version: int) -> candidate_pb2.InvalidReadContinuityCandidate:
    return (
        stack.candidates()
        .GetInvalidReadContinuityCandidate(
            candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id="run-v2", version=version)
        )
        .candidate
    )


def v2_request(
    found: candidate_pb2.InvalidReadContinuityCandidate, **overrides: object
) -> admission_pb2.RequestInvalidReadContinuityV2Request:
    fields: dict[str, object] = {
        "run_id": found.run_id,
        "request_id": "req-v2",
        "digests": found.digests,
        "version": 2,
        "valid_for_seconds": 1800,
        "acknowledge_no_new_grant": True,
        "acknowledge_original_consumption": True,
        "acknowledge_renewed_same_attempt_lease": True,
        "acknowledge_unavailable_source_observations": True,
    }
    fields.update(overrides)
    return admission_pb2.RequestInvalidReadContinuityV2Request(**fields)  # type: ignore[arg-type]


def test_version_two_needs_its_policy_setting_and_admits_with_four_acknowledgements(
    stack: Stack, engine: Engine
) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-v2")
    stack.set_policy()
    assert H.HOLD_REASON_SIBLING_CALL in [h.reason for h in candidate(stack, 1).holds]
    held = candidate(stack, 2)
    assert not held.eligible
    assert [(h.reason, h.requirement) for h in held.holds] == [
        (H.HOLD_REASON_POLICY_DISABLED, common_pb2.HOLD_REQUIREMENT_POLICY)
    ]

    stack.set_policy(allow_unavailable_source_observations=True)
    eligible = candidate(stack, 2)
    assert eligible.eligible and eligible.version == 2, eligible.holds
    counts = row_counts(engine)
    expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "ACKNOWLEDGEMENT_REQUIRED",
        lambda: stack.admissions().RequestInvalidReadContinuityV2(
            v2_request(eligible, acknowledge_unavailable_source_observations=False)
        ),
    )
    expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "VERSION_UNSUPPORTED",
        lambda: stack.admissions().RequestInvalidReadContinuityV2(v2_request(eligible, version=1)),
    )
    assert row_counts(engine) == counts

    response = stack.admissions().RequestInvalidReadContinuityV2(v2_request(eligible))
    assert response.created and response.ticket.version == 2
    assert response.ticket.derived_checkpoint_digest == eligible.proof.derived_checkpoint_digest
    again = stack.admissions().RequestInvalidReadContinuityV2(v2_request(eligible))
    assert not again.created and again.ticket == response.ticket
    read_back = stack.admissions("reader-token").GetInvalidReadContinuity(
        admission_pb2.GetInvalidReadContinuityRequest(run_id="run-v2", request_id="req-v2")
    )
    assert read_back.ticket == response.ticket
    entries = whole_journal(stack.ledger_stub("reader-token"), "run-v2")
    assert '"version":2' in entries[-2].payload_json  # the settlement records the version


def test_version_one_requests_cannot_admit_version_two_proofs(stack: Stack, engine: Engine) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-v2")
    stack.set_policy(allow_unavailable_source_observations=True)
    proof_v2 = candidate(stack, 2)
    assert proof_v2.eligible
    counts = row_counts(engine)
    request = admission_pb2.RequestInvalidReadContinuityRequest(
        run_id="run-v2",
        request_id="req-v1",
        digests=proof_v2.digests,
        version=1,
        valid_for_seconds=1800,
        acknowledge_no_new_grant=True,
        acknowledge_original_consumption=True,
        acknowledge_renewed_same_attempt_lease=True,
    )
    error = expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "CANDIDATE_DIGEST_STALE",
        lambda: stack.admissions().RequestInvalidReadContinuity(request),
    )
    assert "candidate_digest" in {v.subject for v in error.precondition_violations}
    assert row_counts(engine) == counts


def test_the_client_and_cli_evaluate_and_submit_version_two(stack: Stack) -> None:
    import io
    import json
    from contextlib import redirect_stdout

    from services.client import ContinuityClient
    from services.client.cli import main

    seed_held_run(stack.ledger_stub(), FIXTURE, "run-v2")
    stack.set_policy(allow_unavailable_source_observations=True)
    targets = ["--ledger", stack.ledger.target, "--candidate", stack.candidate.target]
    targets += ["--admission", stack.admission.target]
    with ContinuityClient(
        "operator-token",
        ledger_target=stack.ledger.target,
        candidate_target=stack.candidate.target,
        admission_target=stack.admission.target,
    ) as client:
        assert client.invalid_read_continuity_candidate("run-v2", version=2).eligible
        assert not client.invalid_read_continuity_candidate("run-v2").eligible
        reviewed = client.invalid_read_continuity_candidate("run-v2", version=2)
    printed = io.StringIO()
    with redirect_stdout(printed):
        status = main(
            [
                *targets,
                "--token",
                "operator-token",
                "--json",
                "request",
                "submit",
                "run-v2",
                "req-cli",
                "--version",
                "2",
                "--from-candidate",
                "--candidate-digest",
                reviewed.digests.candidate_digest,
                "--valid-for-seconds",
                "600",
                "--acknowledge-no-new-grant",
                "--acknowledge-original-consumption",
                "--acknowledge-renewed-same-attempt-lease",
                "--acknowledge-unavailable-source-observations",
            ]
        )
    assert status == 0, printed.getvalue()
    assert json.loads(printed.getvalue())["ticket"]["version"] == 2
