"""Compose and Kubernetes run mutual TLS by default, with the certificates `make certs` writes
(compose) or mounted Secrets (Kubernetes), and Kubernetes admits to each service only the
components that call it (docs/adr/0047-mutual-tls-everywhere.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from services.gateway.config import GATEWAY
from services.gateway.config import SERVERS as GATEWAY_CALLS
from shared.runtime.config import DEFAULT_PORTS, SERVICE_NAMES
from shared.runtime.dev_certificates import DEFAULT_DIRECTORY, SERVICES, write_certificates
from tests.deploy.test_manifests import (
    CALLS,
    COMPOSE,
    ROOT,
    Cluster,
    compose_env,
    deployment_container,
)

#: Who calls each gRPC service, derived from who calls whom: the services' own targets, the
#: gateway's servers, and the reference worker, which calls the ledger alone.
CALLERS: Mapping[str, frozenset[str]] = {
    name: frozenset(
        [caller for caller, callees in CALLS.items() if name in callees]
        + ([GATEWAY] if name in GATEWAY_CALLS else [])
        + (["worker"] if name == "ledger" else [])
    )
    for name in SERVICE_NAMES
}
TLS_FILES = ("FORGE_TLS_CERT", "FORGE_TLS_KEY", "FORGE_TLS_CA")
COMPONENT = "app.kubernetes.io/component"


def _mounted_certificates(service: Mapping[str, Any], name: str, directory: str) -> Path:
    """The host directory compose mounts at ``directory`` into ``name``."""
    for volume in service.get("volumes") or []:
        source, _, rest = str(volume).partition(":")
        if rest.split(":")[0] == directory:
            return (COMPOSE.parent / source).resolve()
    raise AssertionError(f"compose {name}: nothing mounted at {directory}")


@pytest.mark.parametrize("name", [*SERVICE_NAMES, GATEWAY])
def test_compose_mounts_what_make_certs_writes_for_each_process(
    compose: dict[str, Any], name: str, tmp_path: Path
) -> None:
    env = compose_env(compose["services"][name])
    paths = {variable: PurePosixPath(env[variable]) for variable in TLS_FILES if variable in env}
    assert set(paths) == set(TLS_FILES), f"compose {name}: TLS settings {paths}"
    [directory] = {str(path.parent) for path in paths.values()}
    mounted = _mounted_certificates(compose["services"][name], name, directory)
    assert mounted == (ROOT / DEFAULT_DIRECTORY / name).resolve(), mounted
    assert name in SERVICES, f"make certs writes no certificate for {name}"
    # The file names compose reads are the ones `make certs` writes.
    issued = write_certificates(tmp_path)[name]
    for path in paths.values():
        assert (tmp_path / name / path.name) in (issued.cert, issued.key, issued.ca), path
    if name == GATEWAY:
        # HTTPS for browsers: no client certificate asked of them.
        assert "FORGE_TLS_CLIENT_CA" not in env
    else:
        assert env.get("FORGE_TLS_CLIENT_CA") == env["FORGE_TLS_CA"], "mutual TLS is on"


def _policies_for(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    labels = cluster.of_kind("Deployment")[name]["spec"]["template"]["metadata"]["labels"]
    return [
        policy
        for policy in cluster.of_kind("NetworkPolicy").values()
        if policy["spec"]["podSelector"].get("matchLabels", {}).items() <= labels.items()
    ]


def _admitted(rules: list[dict[str, Any]], port: int) -> tuple[set[str], bool]:
    """The components the rules admit on ``port``, and whether any rule admits every source."""
    components: set[str] = set()
    anyone = False
    for rule in rules:
        ports = {entry.get("port") for entry in rule.get("ports", [])}
        if rule.get("ports") and port not in ports:
            continue
        sources = rule.get("from")
        if not sources:
            anyone = True
            continue
        for source in sources:
            assert set(source) == {"podSelector"}, f"port {port} admits {source}"
            components.add(source["podSelector"]["matchLabels"][COMPONENT])
    return components, anyone


def test_k8s_denies_every_connection_no_policy_admits(cluster: Cluster) -> None:
    assert any(
        policy["spec"]["podSelector"] == {}
        and policy["spec"]["policyTypes"] == ["Ingress"]
        and not policy["spec"].get("ingress")
        for policy in cluster.of_kind("NetworkPolicy").values()
    ), "no default-deny ingress NetworkPolicy"


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_k8s_admits_to_each_service_only_its_callers(cluster: Cluster, name: str) -> None:
    rules = [
        rule
        for policy in _policies_for(cluster, name)
        for rule in policy["spec"].get("ingress", [])
    ]
    components, anyone = _admitted(rules, DEFAULT_PORTS[name])
    assert not anyone, f"{name}: its gRPC port admits every source"
    assert components == CALLERS[name], (
        f"{name} admits {sorted(components)}, but is called by {sorted(CALLERS[name])}"
    )
    assert all(
        policy["spec"]["policyTypes"] == ["Ingress"] for policy in _policies_for(cluster, name)
    )


def test_k8s_gateway_is_the_front_door(cluster: Cluster) -> None:
    port = deployment_container(cluster, GATEWAY)["ports"][0]["containerPort"]
    rules = [
        rule
        for policy in _policies_for(cluster, GATEWAY)
        for rule in policy["spec"].get("ingress", [])
    ]
    _components, anyone = _admitted(rules, port)
    assert anyone, "the gateway's HTTPS port is where callers from outside come in"
