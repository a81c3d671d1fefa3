"""What every part of the client shares: the channels and stubs of the three processes, the
environment's token and targets, and the call helper that turns a status into a typed error."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

import grpc
from grpc_status import rpc_status

from forge.continuity.v1 import (
    admission_pb2_grpc,
    candidate_pb2_grpc,
    execution_pb2_grpc,
    ledger_pb2_grpc,
    policy_pb2_grpc,
    reconciliation_pb2_grpc,
)
from shared.contract.channels import open_channel
from shared.runtime.client import call
from shared.runtime.config import DEFAULT_PORTS, ClientTls
from shared.runtime.errors import Unavailable

TOKEN_VARIABLE: Final = "FORGE_TOKEN"  # noqa: S105 - the variable name, not a token
TARGET_VARIABLES: Final[Mapping[str, str]] = {
    "ledger": "FORGE_LEDGER_TARGET",
    "candidate": "FORGE_CANDIDATE_TARGET",
    "admission": "FORGE_ADMISSION_TARGET",
}

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")


def default_target(service: str, env: Mapping[str, str] | None = None) -> str:
    """``FORGE_<SERVICE>_TARGET`` when set, else the service's default port on 127.0.0.1."""
    env = os.environ if env is None else env
    return env.get(TARGET_VARIABLES[service], "") or f"127.0.0.1:{DEFAULT_PORTS[service]}"


def invoke(method: grpc.UnaryUnaryMultiCallable[_Req, _Resp], request: _Req) -> _Resp:
    """One call; a refusal is raised as the ``shared.runtime.errors`` exception the service sent."""
    response: _Resp = call(method, request)
    return response


class Unreachable(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc,type-arg]
    """A call that could not reach its service fails as ``UNAVAILABLE SERVICE_UNREACHABLE``
    naming the service and the address tried, in the error itself: the transport's own text is
    no part of the answer, and a bare ``UNAVAILABLE`` would not say which of three addresses is
    down. A refusal the service sent (with its ErrorInfo) passes unchanged."""

    def __init__(self, service: str, target: str) -> None:
        self.service = service
        self.target = target

    def intercept_unary_unary(
        self,
        continuation: Callable[[grpc.ClientCallDetails, Any], Any],
        client_call_details: grpc.ClientCallDetails,
        request: Any,
    ) -> Any:
        outcome = continuation(client_call_details, request)
        if outcome.code() is grpc.StatusCode.UNAVAILABLE and rpc_status.from_call(outcome) is None:
            raise Unavailable(
                "SERVICE_UNREACHABLE",
                f"cannot reach the {self.service} service at {self.target}: is it running? "
                f"(--{self.service} or ${TARGET_VARIABLES[self.service]}) Does it require TLS "
                "or a client certificate? (--tls-ca, --tls-cert, --tls-key or $FORGE_TLS_*)",
                metadata={"service": self.service, "target": self.target},
            )
        return outcome


class ClientBase:
    """The channels and stubs one bearer token uses; each workflow mixin builds on these."""

    def __init__(
        self,
        token: str,
        *,
        ledger_target: str,
        candidate_target: str,
        admission_target: str,
        timeout: float = 30.0,
        root_certificates: bytes | None = None,
        tls: ClientTls | None = None,
    ) -> None:
        """``tls`` (FORGE_TLS_CA / FORGE_TLS_CERT / FORGE_TLS_KEY): TLS to all three services,
        with the client certificate when one is given (mutual TLS); None: plaintext, unless
        ``root_certificates`` asks for TLS with those roots."""
        self.targets = {
            "ledger": ledger_target,
            "candidate": candidate_target,
            "admission": admission_target,
        }

        def channel(service: str) -> grpc.Channel:
            target = self.targets[service]
            return open_channel(
                target,
                token,
                root_certificates=root_certificates,
                tls=tls,
                default_timeout=timeout,
                extra_interceptors=(Unreachable(service, target),),
            )

        self._channels = [channel(name) for name in ("ledger", "candidate", "admission")]
        ledger, candidate, admission = self._channels
        self._ledger = ledger_pb2_grpc.LedgerServiceStub(ledger)
        self._policy = policy_pb2_grpc.PolicyServiceStub(ledger)
        self._execution = execution_pb2_grpc.ExecutionServiceStub(ledger)
        self._reconciliation = reconciliation_pb2_grpc.ReconciliationServiceStub(ledger)
        self._candidate = candidate_pb2_grpc.CandidateServiceStub(candidate)
        self._admission = admission_pb2_grpc.AdmissionServiceStub(admission)

    def close(self) -> None:
        for channel in self._channels:
            channel.close()
