"""Submissions are validated by the client before anything is sent.

Every client here points at a closed port: a call that left the process would fail as
UNAVAILABLE, so an ``InvalidArgument`` with ``origin=client`` proves nothing was sent. The last
tests show the contrast: a well-formed submission does go out (and meets the closed port).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from forge.continuity.v1 import candidate_pb2, common_pb2
from services.client import ContinuityClient
from shared.runtime.errors import InvalidArgument, Unavailable

DIGESTS = common_pb2.ContinuityDigests(
    candidate_digest="sha256:" + "a" * 64,
    run_digest="sha256:" + "b" * 64,
    journal_digest="sha256:" + "c" * 64,
    policy_digest="sha256:" + "d" * 64,
)
V1_ACKS = (
    "acknowledge_no_new_grant",
    "acknowledge_original_consumption",
    "acknowledge_renewed_same_attempt_lease",
)


@pytest.fixture
def client(closed_target: str) -> Iterator[ContinuityClient]:
    with ContinuityClient(
        "operator-token",
        ledger_target=closed_target,
        candidate_target=closed_target,
        admission_target=closed_target,
        timeout=5.0,
    ) as opened:
        yield opened


def submission(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "request_id": "req-1",
        "digests": DIGESTS,
        "version": 1,
        "valid_for_seconds": 1800,
        **dict.fromkeys(V1_ACKS, True),
    }
    fields.update(overrides)
    return fields


def refused_locally(invoke: Any, **kwargs: Any) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as refused:
        invoke(**kwargs)
    assert refused.value.metadata.get("origin") == "client"
    return refused.value


@pytest.mark.parametrize("version", [0, 3, -1, True, "1", 1.0, None])
def test_an_unsupported_version_is_refused(client: ContinuityClient, version: object) -> None:
    error = refused_locally(client.request_invalid_read_continuity, **submission(version=version))
    assert error.reason == "VERSION_UNSUPPORTED"
    assert [v.field for v in error.field_violations] == ["version"]


@pytest.mark.parametrize("acknowledgement", V1_ACKS)
@pytest.mark.parametrize("given", [False, None, 1, "true", "yes", [True]])
def test_each_acknowledgement_must_be_exactly_true(
    client: ContinuityClient, acknowledgement: str, given: object
) -> None:
    error = refused_locally(
        client.request_invalid_read_continuity, **submission(**{acknowledgement: given})
    )
    assert error.reason == "ACKNOWLEDGEMENT_REQUIRED"
    assert [v.field for v in error.field_violations] == [acknowledgement]
    assert error.metadata["missing"] == acknowledgement


def test_every_missing_acknowledgement_is_named(client: ContinuityClient) -> None:
    error = refused_locally(
        client.request_invalid_read_continuity, **submission(**dict.fromkeys(V1_ACKS, False))
    )
    assert error.reason == "ACKNOWLEDGEMENT_REQUIRED"
    assert [v.field for v in error.field_violations] == list(V1_ACKS)


@pytest.mark.parametrize("given", [None, False, 1, "true"])
def test_version_2_requires_the_observation_acknowledgement(
    client: ContinuityClient, given: object
) -> None:
    error = refused_locally(
        client.request_invalid_read_continuity,
        **submission(version=2, acknowledge_unavailable_source_observations=given),
    )
    assert error.reason == "ACKNOWLEDGEMENT_REQUIRED"
    assert [v.field for v in error.field_violations] == [
        "acknowledge_unavailable_source_observations"
    ]


def test_version_1_takes_no_observation_acknowledgement(client: ContinuityClient) -> None:
    error = refused_locally(
        client.request_invalid_read_continuity,
        **submission(version=1, acknowledge_unavailable_source_observations=True),
    )
    assert error.reason == "FIELD_INVALID"
    assert [v.field for v in error.field_violations] == [
        "acknowledge_unavailable_source_observations"
    ]


@pytest.mark.parametrize("seconds", [0, -5, 7201, 86400, True, 1.5, "60"])
def test_the_lease_window_is_bounded(client: ContinuityClient, seconds: object) -> None:
    error = refused_locally(
        client.request_invalid_read_continuity, **submission(valid_for_seconds=seconds)
    )
    assert error.reason == "FIELD_INVALID"
    assert [v.field for v in error.field_violations] == ["valid_for_seconds"]


@pytest.mark.parametrize(
    ("overrides", "fields"),
    [
        ({"run_id": ""}, ["run_id"]),
        ({"request_id": ""}, ["request_id"]),
        ({"run_id": "", "request_id": ""}, ["run_id", "request_id"]),
        ({"digests": "sha256:" + "a" * 64}, ["digests"]),
        (
            {"digests": common_pb2.ContinuityDigests(candidate_digest=DIGESTS.candidate_digest)},
            ["digests.run_digest", "digests.journal_digest", "digests.policy_digest"],
        ),
        (
            {"digests": candidate_pb2.InvalidReadContinuityCandidate()},
            [
                "digests.candidate_digest",
                "digests.run_digest",
                "digests.journal_digest",
                "digests.policy_digest",
            ],
        ),
    ],
)
def test_identifiers_and_digests_are_required(
    client: ContinuityClient, overrides: dict[str, Any], fields: list[str]
) -> None:
    error = refused_locally(client.request_invalid_read_continuity, **submission(**overrides))
    assert error.reason == "FIELD_INVALID"
    assert [v.field for v in error.field_violations] == fields


RECOVERY_ACKS = {
    "request_invalid_read_recovery": (
        "acknowledge_never_claimed",
        "acknowledge_same_request_and_attempt",
        "acknowledge_budgets_charged",
        "acknowledge_same_attempt_lease",
    ),
    "request_rejected_boundary_recovery": (
        "acknowledge_reviewed_provider_epoch",
        "acknowledge_no_response_or_tool_replay",
        "acknowledge_same_request_and_budgets",
        "acknowledge_finite_ownership_lease",
    ),
    "request_readonly_observation_recovery": (
        "acknowledge_unavailable_observation",
        "acknowledge_no_original_callback_replay",
        "acknowledge_same_request_attempt_and_budgets",
        "acknowledge_finite_ownership_lease",
    ),
}


def recovery(method: str, **overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "request_id": "req-1",
        "recovery_id": "rec-1",
        "candidate_digest": "sha256:" + "e" * 64,
        "valid_for_seconds": 600,
        **dict.fromkeys(RECOVERY_ACKS[method], True),
    }
    if method == "request_rejected_boundary_recovery":
        fields["reviewed_rejection"] = common_pb2.ReviewedProviderRejectionV1(
            provider_epoch="epoch-1"
        )
        fields["corrective_provider"] = common_pb2.CorrectiveProviderConfigurationV1(
            provider_epoch="epoch-2", configuration_digest="sha256:" + "f" * 64
        )
    fields.update(overrides)
    return fields


@pytest.mark.parametrize(
    ("method", "acknowledgement"),
    [(method, ack) for method, acks in RECOVERY_ACKS.items() for ack in acks],
)
def test_recovery_acknowledgements_must_be_exactly_true(
    client: ContinuityClient, method: str, acknowledgement: str
) -> None:
    error = refused_locally(getattr(client, method), **recovery(method, **{acknowledgement: 1}))
    assert error.reason == "ACKNOWLEDGEMENT_REQUIRED"
    assert [v.field for v in error.field_violations] == [acknowledgement]


@pytest.mark.parametrize("method", sorted(RECOVERY_ACKS))
@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"recovery_id": ""}, "recovery_id"),
        ({"candidate_digest": ""}, "candidate_digest"),
        ({"candidate_digest": candidate_pb2.RecoveryCandidate()}, "candidate_digest"),
        ({"valid_for_seconds": 0}, "valid_for_seconds"),
        ({"valid_for_seconds": 7201}, "valid_for_seconds"),
    ],
)
def test_recovery_fields_are_checked(
    client: ContinuityClient, method: str, overrides: dict[str, Any], field: str
) -> None:
    error = refused_locally(getattr(client, method), **recovery(method, **overrides))
    assert error.reason == "FIELD_INVALID"
    assert [v.field for v in error.field_violations] == [field]


def test_the_reviewed_rejection_must_be_typed(client: ContinuityClient) -> None:
    method = "request_rejected_boundary_recovery"
    error = refused_locally(
        client.request_rejected_boundary_recovery,
        **recovery(method, reviewed_rejection={"provider_epoch": "epoch-1"}),
    )
    assert [v.field for v in error.field_violations] == ["reviewed_rejection"]
    error = refused_locally(
        client.request_rejected_boundary_recovery,
        **recovery(method, corrective_provider={"provider_epoch": "epoch-2"}),
    )
    assert error.reason == "CORRECTIVE_PROVIDER_INVALID"
    assert [v.field for v in error.field_violations] == ["corrective_provider"]
    error = refused_locally(
        client.rejected_boundary_recovery_candidate,
        run_id="run-1",
        request_id="req-1",
        reviewed_rejection=None,
    )
    assert [v.field for v in error.field_violations] == ["reviewed_rejection"]


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"digests": candidate_pb2.InvalidReadContinuityCandidate(digests=DIGESTS)},
        {"version": 2, "acknowledge_unavailable_source_observations": True},
        {"valid_for_seconds": 1},
        {"valid_for_seconds": 7200},
    ],
)
def test_a_well_formed_submission_is_sent(
    client: ContinuityClient, overrides: dict[str, Any]
) -> None:
    """The contrast: these pass local validation, leave the process and meet the closed port."""
    with pytest.raises(Unavailable):
        client.request_invalid_read_continuity(**submission(**overrides))


@pytest.mark.parametrize("method", sorted(RECOVERY_ACKS))
def test_a_well_formed_recovery_is_sent(client: ContinuityClient, method: str) -> None:
    with pytest.raises(Unavailable):
        getattr(client, method)(**recovery(method))
    with pytest.raises(Unavailable):
        getattr(client, method)(
            **recovery(
                method,
                candidate_digest=candidate_pb2.RecoveryCandidate(candidate_digest="sha256:x"),
            )
        )


@pytest.mark.parametrize(
    ("corrective", "field"),
    [
        (
            {"provider_epoch": "epoch-1", "configuration_digest": "sha256:" + "f" * 64},
            "corrective_provider.provider_epoch",  # the rejected epoch again
        ),
        (
            {"provider_epoch": "", "configuration_digest": "sha256:" + "f" * 64},
            "corrective_provider.provider_epoch",
        ),
        (
            {"provider_epoch": "epoch-2", "configuration_digest": "sha256:short"},
            "corrective_provider.configuration_digest",
        ),
    ],
)
def test_the_corrective_provider_is_checked_locally(
    client: ContinuityClient, corrective: dict[str, str], field: str
) -> None:
    method = "request_rejected_boundary_recovery"
    error = refused_locally(
        client.request_rejected_boundary_recovery,
        **recovery(
            method,
            corrective_provider=common_pb2.CorrectiveProviderConfigurationV1(**corrective),
        ),
    )
    assert error.reason == "CORRECTIVE_PROVIDER_INVALID"
    assert [v.field for v in error.field_violations] == [field]
