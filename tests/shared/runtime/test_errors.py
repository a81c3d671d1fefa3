"""The one error module: domain errors ↔ rich gRPC statuses."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from shared.runtime.errors import (
    ERROR_DOMAIN,
    Aborted,
    DomainError,
    FieldViolation,
    InvalidArgument,
    PreconditionViolation,
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
