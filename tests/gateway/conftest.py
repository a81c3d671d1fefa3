"""The four real services on loopback over one SQLite ledger, and the gateway in front of them.

The gateway is the real ASGI app under a real uvicorn server on an ephemeral loopback port (in a
thread of the test process); clients talk HTTP to it (httpx2, or the curl binary).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
import uvicorn
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, ledger_pb2_grpc, policy_pb2, policy_pb2_grpc
from services.admission.servicer import bindings as admission_bindings
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings as candidate_bindings
from services.demo.seed import load_fixture, seed_held_run
from services.gateway.app import create_app
from services.gateway.config import GatewaySettings
from services.ledger.database import make_engine, upgrade
from services.ledger.domain.signing import HeadSigner
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.contract.channels import open_channel
from tests.support import Served, admission_downstream, row_counts, serve, token_roles

STARTUP_SECONDS = 15.0


@dataclass
class RunningGateway:
    """A started gateway and the engine of the ledger behind it."""

    url: str
    engine: Engine
    ledger: Served

    def client(self, token: str = "") -> httpx2.Client:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx2.Client(base_url=self.url, headers=headers, timeout=30)

    def ledger_stub(self, token: str = "writer-token") -> ledger_pb2_grpc.LedgerServiceStub:
        return ledger_pb2_grpc.LedgerServiceStub(self.ledger.channel(token))

    def rows(self) -> dict[str, int]:
        return row_counts(self.engine)


def _loopback_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def running_gateway(settings: GatewaySettings) -> Iterator[str]:
    """uvicorn serving the gateway app on an ephemeral loopback port; stopped on exit."""
    sock = _loopback_socket()
    server = uvicorn.Server(
        # Open streams (a console page following the journal) are cut after a second, as the
        # gateway's own main bounds its drain; without it each such test waited out the join.
        uvicorn.Config(
            create_app(settings),
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=1,
            **settings.uvicorn_tls(),  # type: ignore[arg-type]
        )
    )
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])))
    thread.start()
    deadline = time.monotonic() + STARTUP_SECONDS
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the gateway did not start")
        time.sleep(0.05)
    try:
        scheme = "https" if settings.tls_cert_file else "http"
        yield f"{scheme}://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[RunningGateway]:
    """The four services over a fresh SQLite ledger (signing its heads), and the gateway calling
    them."""
    url = f"sqlite:///{tmp_path}/ledger.db"
    engine = make_engine(url)
    upgrade(engine)
    with (
        serve(
            "ledger",
            ledger_bindings(Ledger(engine, authority=token_roles, signer=HeadSigner.generate())),
        ) as ledger,
        serve("reconstruction", reconstruction_bindings()) as reconstruction,
    ):
        sources = GrpcCandidateSources(
            open_channel(ledger.target, "service-token"),
            open_channel(reconstruction.target, "candidate-service-token"),
        )
        with serve("candidate", candidate_bindings(sources)) as candidate:
            downstream = admission_downstream(ledger.target, candidate.target)
            with serve("admission", admission_bindings(downstream)) as admission:
                settings = GatewaySettings(
                    targets={
                        "ledger": ledger.target,
                        "candidate": candidate.target,
                        "admission": admission.target,
                    },
                    max_body_bytes=64 * 1024,
                )
                with running_gateway(settings) as base_url:
                    yield RunningGateway(base_url, engine, ledger)
    engine.dispose()


def reason_of(body: dict[str, Any]) -> str:
    """The ErrorInfo reason of a Status body."""
    infos = [d for d in body.get("details", []) if d["@type"].endswith("google.rpc.ErrorInfo")]
    assert len(infos) == 1, body
    return str(infos[0]["reason"])


V1_ACKNOWLEDGEMENTS = {
    "acknowledge_no_new_grant": True,
    "acknowledge_original_consumption": True,
    "acknowledge_renewed_same_attempt_lease": True,
}


def seed(gateway: RunningGateway, run_id: str, fixture: str = "v1_basic", **options: Any) -> None:
    """A held run, written over gRPC (the HTTP seeding is exercised in test_every_route)."""
    seed_held_run(gateway.ledger_stub(), load_fixture(fixture), run_id, **options)


def enable_policy(gateway: RunningGateway) -> None:
    policy = policy_pb2_grpc.PolicyServiceStub(gateway.ledger.channel("admin-token"))
    current = policy.GetPolicy(policy_pb2.GetPolicyRequest()).policy
    policy.PutPolicy(
        policy_pb2.PutPolicyRequest(
            expected_revision=current.revision,
            settings=common_pb2.PolicySettings(enabled=True, window_seconds=3600),
        )
    )


def v1_submission(candidate: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """The JSON body of a v1 admission for a candidate read over HTTP."""
    body = {
        "digests": candidate["digests"],
        "version": 1,
        "valid_for_seconds": 1800,
        **V1_ACKNOWLEDGEMENTS,
    }
    body.update(overrides)
    return body


def read_candidate(gateway: RunningGateway, run_id: str) -> dict[str, Any]:
    with gateway.client("operator-token") as client:
        reply = client.get(f"/api/v1/runs/{run_id}/invalid-read-continuity/candidate")
    assert reply.status_code == 200, reply.text
    candidate: dict[str, Any] = reply.json()["candidate"]
    assert candidate["eligible"], candidate["holds"]
    return candidate
