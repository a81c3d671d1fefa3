"""Assertions on rich gRPC errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from shared.runtime.errors import ERROR_DOMAIN, DomainError, from_rpc_error


def expect_error(code: grpc.StatusCode, reason: str, invoke: Callable[[], Any]) -> DomainError:
    """Run ``invoke``; assert it fails with ``code`` and exactly one ErrorInfo with ``reason``."""
    with pytest.raises(grpc.RpcError) as caught:
        invoke()
    error = caught.value
    assert isinstance(error, grpc.Call)
    assert error.code() == code, f"expected {code}, got {error.code()}: {error.details()}"
    from google.rpc import error_details_pb2
    from grpc_status import rpc_status

    status = rpc_status.from_call(error)
    assert status is not None, "no rich status details"
    infos = [d for d in status.details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)]
    assert len(infos) == 1, f"expected exactly one ErrorInfo, got {len(infos)}"
    domain_error = from_rpc_error(error)
    info = error_details_pb2.ErrorInfo()
    infos[0].Unpack(info)
    assert info.domain == ERROR_DOMAIN
    assert domain_error.reason == reason, f"expected {reason}, got {domain_error.reason}"
    return domain_error
