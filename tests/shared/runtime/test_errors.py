"""The one error module: domain errors ↔ rich gRPC statuses."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from forge.continuity.v1 import common_pb2
from shared.runtime.errors import (
    ERROR_DOMAIN,
    Aborted,
    DomainError,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    PreconditionViolation,
    RefusalDetail,
    field_required,
    to_status,
)


def test_status_carries_exactly_one_error_info_and_the_fitting_details() -> None:
    error = InvalidArgument(
        "FIELD_INVALID",
        "bad",
        metadata={"field": "x"},
        field_violations=[FieldViolation("x", "must be set")],
    )
    status = to_status(error)
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT
    decoded = status_pb2.Status.FromString(
        dict(status.trailing_metadata)["grpc-status-details-bin"]
    )
    kinds = [detail.type_url.rsplit("/", 1)[-1] for detail in decoded.details]
    assert kinds == ["google.rpc.ErrorInfo", "google.rpc.BadRequest"]
    info = error_details_pb2.ErrorInfo()
    decoded.details[0].Unpack(info)
    assert (info.reason, info.domain, dict(info.metadata)) == (
        "FIELD_INVALID",
        ERROR_DOMAIN,
        {"field": "x"},
    )


def test_precondition_failures_are_packed() -> None:
    status = to_status(
        Aborted(
            "JOURNAL_HEAD_STALE",
            "stale",
            precondition_violations=[PreconditionViolation("A", "b", "c")],
        )
    )
    decoded = status_pb2.Status.FromString(
        dict(status.trailing_metadata)["grpc-status-details-bin"]
    )
    assert [d.type_url.rsplit("/", 1)[-1] for d in decoded.details] == [
        "google.rpc.ErrorInfo",
        "google.rpc.PreconditionFailure",
    ]
    assert status.code == grpc.StatusCode.ABORTED


@pytest.mark.parametrize(
    "reason", ["lower", "Mixed_Case", "TRAILING_", "1LEADING", "", "FIELD_INVALID\n"]
)
def test_reasons_must_be_upper_snake(reason: str) -> None:
    with pytest.raises(ValueError):
        DomainError(reason, "message")


def _handoff(action: str) -> common_pb2.HandoffPayload:
    return common_pb2.HandoffPayload(
        permitted_next_actions=[common_pb2.PermittedAction(action=action)]
    )


def test_a_refusal_detail_is_read_on_a_refusal_by_the_state_only() -> None:
    """RefusalDetail (ADR 0046): the success path and malformed input never read; a refusal by
    the state reads once; a refusal already carrying the detail keeps its own; a failing read
    leaves the refusal as it was."""
    reads: list[str] = []

    def read(refused: DomainError) -> common_pb2.HandoffPayload:
        reads.append(refused.reason)
        return _handoff("read_execution_request")

    with RefusalDetail(common_pb2.HandoffPayload, read):
        pass
    with pytest.raises(InvalidArgument), RefusalDetail(common_pb2.HandoffPayload, read):
        raise field_required("reason")
    assert reads == []
    with pytest.raises(FailedPrecondition) as stale, RefusalDetail(common_pb2.HandoffPayload, read):
        raise FailedPrecondition("LEASE_GENERATION_STALE", "stale")
    assert reads == ["LEASE_GENERATION_STALE"]
    carried = stale.value.detail(common_pb2.HandoffPayload)
    assert (
        carried is not None and carried.permitted_next_actions[0].action == "read_execution_request"
    )
    own = _handoff("obtain_authority")
    with pytest.raises(FailedPrecondition) as held, RefusalDetail(common_pb2.HandoffPayload, read):
        raise FailedPrecondition("RECOVERY_UNRESOLVED", "held", details=[own])
    assert held.value.details == (own,) and len(reads) == 1

    def broken(_refused: DomainError) -> common_pb2.HandoffPayload:
        raise RuntimeError("database gone")

    with (
        pytest.raises(FailedPrecondition) as kept,
        RefusalDetail(common_pb2.HandoffPayload, broken),
    ):
        raise FailedPrecondition("LEASE_EXPIRED", "expired")
    assert kept.value.details == ()
