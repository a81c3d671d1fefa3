"""The gateway calls gRPC servers that speak TLS, verifying them with FORGE_TLS_CA (as it does in
Kubernetes, where every service port is TLS), presents its own certificate to servers that require
one, and serves HTTPS with it, asking HTTP callers for a certificate when FORGE_TLS_CLIENT_CA is
set."""

from __future__ import annotations

import ssl
from dataclasses import replace
from pathlib import Path

import httpx2
import pytest

from services.gateway.config import GatewaySettings, load_gateway_settings
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from shared.runtime.config import ClientTls, TlsSettings
from shared.runtime.dev_certificates import write_certificates
from tests.certificates import server_files
from tests.gateway.conftest import running_gateway
from tests.support import serve

POLICY = "/api/v1/invalid-read-continuity/policy"


def trusting(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


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


def test_the_gateway_serves_https_and_passes_a_server_that_requires_client_certificates(
    ledger: Ledger, tmp_path: Path
) -> None:
    certs = write_certificates(tmp_path / "certs")
    own, served_by = certs["gateway"], certs["ledger"]
    settings = load_gateway_settings(
        [],
        {
            "FORGE_TLS_CERT": str(own.cert),
            "FORGE_TLS_KEY": str(own.key),
            "FORGE_TLS_CA": str(own.ca),
        },
    )
    assert settings.upstream_tls == ClientTls(str(own.ca), str(own.cert), str(own.key))
    mutual = TlsSettings(str(served_by.cert), str(served_by.key), str(served_by.ca))
    with serve("ledger", bindings(ledger), tls=mutual) as ledger_served:
        targets = dict.fromkeys(("ledger", "candidate", "admission"), ledger_served.target)
        headers = {"authorization": "Bearer reader-token"}
        with running_gateway(replace(settings, targets=targets)) as url:
            assert url.startswith("https://")
            answer = httpx2.get(url + POLICY, headers=headers, timeout=30, verify=trusting(own.ca))
            assert answer.status_code == 200, answer.text
            # The token still decides: the gateway's certificate names no principal.
            anonymous = httpx2.get(url + POLICY, timeout=30, verify=trusting(own.ca))
            assert anonymous.status_code == 401, anonymous.text
            assert anonymous.json()["details"][0]["reason"] == "CREDENTIALS_MISSING"
        # Without its certificate the gateway cannot pass the ledger's handshake.
        without = replace(settings, targets=targets, tls_cert_file="", tls_key_file="")
        with running_gateway(without) as url:
            assert httpx2.get(url + POLICY, headers=headers, timeout=30).status_code == 503


def test_the_gateway_asks_https_callers_for_a_certificate_of_its_client_ca(
    tmp_path: Path,
) -> None:
    certs = write_certificates(tmp_path / "certs")
    own, operator = certs["gateway"], certs["operator"]
    settings = GatewaySettings(
        tls_cert_file=str(own.cert),
        tls_key_file=str(own.key),
        tls_ca_file=str(own.ca),
        tls_client_ca_file=str(own.ca),
    )
    with running_gateway(settings) as url:
        with_certificate = trusting(own.ca)
        with_certificate.load_cert_chain(operator.cert, operator.key)
        assert httpx2.get(url + "/livez", timeout=30, verify=with_certificate).status_code == 200
        with pytest.raises(httpx2.TransportError):
            httpx2.get(url + "/livez", timeout=30, verify=trusting(own.ca))
