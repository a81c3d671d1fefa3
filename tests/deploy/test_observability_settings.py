"""Every deployed process exports spans to a collector, logs JSON and serves /metrics on the
port its Prometheus discovery names (compose and Kubernetes alike)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.runtime.config import DEFAULT_METRICS_PORTS, metrics_port_variable
from tests.deploy.test_manifests import (
    Cluster,
    compose_env,
    deployment_container,
)
from tests.deploy.test_manifests import cluster as cluster  # noqa: PLC0414 - the fixture
from tests.deploy.test_manifests import compose as compose  # noqa: PLC0414 - the fixture

PROCESSES = tuple(DEFAULT_METRICS_PORTS)


@pytest.mark.parametrize("name", PROCESSES)
def test_compose_process_exports_spans_logs_json_and_serves_metrics(
    compose: dict[str, Any], name: str
) -> None:
    env = compose_env(compose["services"][name])
    assert env.get("OTEL_EXPORTER_OTLP_ENDPOINT"), f"compose {name} exports no spans"
    assert env.get("OTEL_SERVICE_NAME") == f"forge-continuity-{name}"
    assert env.get("FORGE_LOG_FORMAT") == "json"
    assert env.get(metrics_port_variable(name)) == str(DEFAULT_METRICS_PORTS[name])


@pytest.mark.parametrize("name", PROCESSES)
def test_k8s_process_exports_spans_logs_json_and_is_scraped(cluster: Cluster, name: str) -> None:
    container = deployment_container(cluster, name)
    env = cluster.container_env(container)
    assert env.get("OTEL_EXPORTER_OTLP_ENDPOINT"), f"Deployment {name} exports no spans"
    assert env.get("OTEL_SERVICE_NAME") == f"forge-continuity-{name}"
    assert env.get("FORGE_LOG_FORMAT") == "json"
    port = env.get(metrics_port_variable(name))
    assert port == str(DEFAULT_METRICS_PORTS[name])
    template = cluster.of_kind("Deployment")[name]["spec"]["template"]["metadata"]
    annotations = template.get("annotations", {})
    assert annotations.get("prometheus.io/scrape") == "true"
    assert annotations.get("prometheus.io/port") == port
    assert annotations.get("prometheus.io/path") == "/metrics"
