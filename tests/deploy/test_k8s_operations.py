"""Kubernetes as several replicas need it: mutual TLS on every service port, NetworkPolicies that
admit only each service's callers, two replicas or more with
a disruption budget each, a preStop sleep that drains endpoints before the server stops, and
headless Services so callers spread their calls over every replica."""

from __future__ import annotations

import pytest

from services.gateway.config import GATEWAY
from shared.runtime.config import SERVICE_NAMES
from tests.deploy.test_manifests import Cluster, deployment_container, secret_file


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_k8s_services_speak_tls_with_their_own_certificate(cluster: Cluster, name: str) -> None:
    env = cluster.container_env(deployment_container(cluster, name))
    files = {v: env.get(v) for v in ("FORGE_TLS_CERT", "FORGE_TLS_KEY", "FORGE_TLS_CA")}
    assert all(isinstance(p, str) and p for p in files.values()), f"Deployment {name}: {files}"
    secrets = {secret_file(cluster, name, str(path))[0] for path in files.values()}
    assert secrets == {f"forge-tls-{name}"}, f"Deployment {name}: TLS files from {secrets}"
    # Mutual TLS: client certificates of the same CA required (ADR 0047).
    assert env.get("FORGE_TLS_CLIENT_CA") == env["FORGE_TLS_CA"], f"Deployment {name}: {env}"
    gateway = cluster.container_env(deployment_container(cluster, GATEWAY))
    files = {v: gateway.get(v) for v in ("FORGE_TLS_CERT", "FORGE_TLS_KEY", "FORGE_TLS_CA")}
    secrets = {secret_file(cluster, GATEWAY, str(path))[0] for path in files.values()}
    # Its certificate serves HTTPS and opens the services' handshakes.
    assert secrets == {"forge-tls-gateway"}, f"the gateway's TLS files from {secrets}"


@pytest.mark.parametrize("name", [*SERVICE_NAMES, GATEWAY])
def test_k8s_every_service_has_replicas_a_budget_and_drains_first(
    cluster: Cluster, name: str
) -> None:
    deployment = cluster.of_kind("Deployment")[name]
    assert int(deployment["spec"].get("replicas", 1)) >= 2, f"Deployment {name}: one replica"
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    budgets = [
        b
        for b in cluster.of_kind("PodDisruptionBudget").values()
        if b["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ]
    assert len(budgets) == 1, f"Deployment {name}: {len(budgets)} PodDisruptionBudgets"
    assert budgets[0]["spec"].get("maxUnavailable") == 1, budgets[0]["spec"]
    container = deployment_container(cluster, name)
    command = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command")
    assert command and command[0] == "sleep", f"Deployment {name}: no preStop sleep"
    grace = float(str(cluster.container_env(container).get("FORGE_GRACE_SECONDS", 10)))
    period = deployment["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
    assert float(command[1]) + grace < period, (
        f"Deployment {name}: preStop {command[1]}s + drain {grace}s exceed {period}s"
    )


def test_k8s_grpc_services_resolve_to_every_replica(cluster: Cluster) -> None:
    for name in SERVICE_NAMES:
        assert cluster.of_kind("Service")[name]["spec"].get("clusterIP") == "None", (
            f"Service {name} must be headless so callers' round_robin sees every replica"
        )
