"""The alert rules and scrape configurations in deploy/ as Prometheus reads them: `promtool test
rules` runs deploy/prometheus-alerts.test.yaml (each alert fires for its fault, none on a healthy
run), `promtool check config` the compose scrape configuration, and the Kubernetes one is
checked against the manifests (Debian's promtool leaves Kubernetes discovery out). Without
promtool the tests skip on a developer machine and fail under CI=true (make test installs it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPONENTS = ("ledger", "reconstruction", "candidate", "admission", "gateway")


def promtool() -> str:
    found = os.environ.get("FORGE_PROMTOOL") or shutil.which("promtool") or ""
    if found:
        return found
    message = "promtool is not installed (apt-get install prometheus; make test installs it)"
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(message)
    pytest.skip(message)


def _run(*args: str) -> str:
    done = subprocess.run(
        [promtool(), *args], cwd=DEPLOY, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / name).read_text(encoding="utf-8"))
    return loaded


def test_every_alert_fires_for_its_fault_and_stays_silent_on_a_healthy_run() -> None:
    assert "SUCCESS" in _run("test", "rules", "prometheus-alerts.test.yaml")
    tested = _load("prometheus-alerts.test.yaml")
    firing = {
        check["alertname"]
        for test in tested["tests"]
        for check in test["alert_rule_test"]
        if check.get("exp_alerts")
    }
    # The alerts the freeze, kill and first-error scenarios must raise.
    assert {
        "ForgeDatabaseTimeouts",
        "ForgeDatabaseUnavailable",
        "ForgeInternalErrors",
        "ForgeTargetDown",
    } <= firing


def test_the_compose_scrape_configuration_is_valid_and_loads_the_rules() -> None:
    checked = _run("check", "config", "prometheus-compose.yml")
    assert "1 rule files found" in checked


@pytest.mark.parametrize("name", ["prometheus.yml", "prometheus-compose.yml"])
def test_every_process_is_scraped_as_a_job_the_alerts_select(name: str) -> None:
    config = _load(name)
    jobs = [job["job_name"] for job in config["scrape_configs"]]
    assert jobs == [f"forge-{component}" for component in COMPONENTS]
    assert config["rule_files"] == ["prometheus-alerts.yaml"]
    groups = _load("prometheus-alerts.yaml")["groups"]
    rules = {rule["alert"]: rule for group in groups for rule in group["rules"]}
    selector = re.search(r'job=~"([^"]+)"', rules["ForgeTargetDown"]["expr"])
    assert selector is not None
    assert all(re.fullmatch(selector.group(1), job) for job in jobs)


def test_the_kubernetes_jobs_keep_each_components_pods_on_their_annotated_port() -> None:
    for job in _load("prometheus.yml")["scrape_configs"]:
        component = job["job_name"].removeprefix("forge-")
        manifest = (DEPLOY / "k8s" / f"{component}.yaml").read_text(encoding="utf-8")
        assert 'prometheus.io/scrape: "true"' in manifest
        assert job["kubernetes_sd_configs"][0]["namespaces"]["names"] == ["forge-continuity"]
        keep = job["relabel_configs"][0]
        assert keep["action"] == "keep" and keep["regex"] == component
        assert "app_kubernetes_io_component" in keep["source_labels"][0]
