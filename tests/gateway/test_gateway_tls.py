"""The gateway calls gRPC servers that speak TLS, verifying them with FORGE_TLS_CA (as it does in
Kubernetes, where every service port is TLS)."""

from __future__ import annotations

from pathlib import Path

import httpx2

from services.gateway.config import GatewaySettings, load_gateway_settings
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from shared.runtime.config import TlsSettings
from tests.certificates import server_files
from tests.gateway.conftest import running_gateway
from tests.support import serve

POLICY = "/api/v1/invalid-read-continuity/policy"


def test_the_gateway_reaches_a_tls_ledger_with_the_ca_and_not_without(
    ledger: Ledger, tmp_path: Path
) -> None:
    cert, key, ca = server_files(tmp_path)
    assert load_gateway_settings([], {"FORGE_TLS_CA": str(ca)}).tls_ca_file == str(ca)
    with serve("ledger", bindings(ledger), tls=TlsSettings(str(cert), str(key))) as ledger_served:
        target = f"localhost:{ledger_served.running.port}"
        targets = dict.fromkeys(("ledger", "candidate", "admission"), target)
        headers = {"authorization": "Bearer reader-token"}
        with running_gateway(GatewaySettings(targets=targets, tls_ca_file=str(ca))) as url:
            answer = httpx2.get(url + POLICY, headers=headers, timeout=30)
            assert answer.status_code == 200, answer.text
            assert answer.json()["policy"]["revision"] == "1"  # int64 is a JSON string
        with running_gateway(GatewaySettings(targets=targets)) as url:
            # Plaintext to a TLS port: the server is unreachable for the gateway.
            assert httpx2.get(url + POLICY, headers=headers, timeout=30).status_code == 503
