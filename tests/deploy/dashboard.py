"""What deploy/grafana-dashboard.json and deploy/prometheus-alerts.yaml ask Prometheus for: the
metric names in their expressions, and the names the processes other than the ledger export
(their families are declared when their modules are imported; the ledger's come from a scrape
of a real ledger process, tests/ledger/test_metrics_endpoint.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import REGISTRY, generate_latest

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana-dashboard.json"
ALERTS = ROOT / "deploy" / "prometheus-alerts.yaml"
# Metric names in PromQL: identifiers that are not functions, keywords or label names.
_IDENTIFIER = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_NOT_METRICS = frozenset(
    {
        "sum",
        "rate",
        "irate",
        "increase",
        "histogram_quantile",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "and",
        "or",
        "unless",
        "max",
        "min",
        "avg",
        "count",
        "clamp_min",
        "clamp_max",
        "max_over_time",
        "min_over_time",
        "avg_over_time",
        "time",
        "vector",
        "label_replace",
        "absent",
        "topk",
        "bool",
        "le",
        "offset",
    }
)


def expressions_of(node: Any) -> list[str]:
    """Every ``expr`` string anywhere in a JSON / YAML document."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                found.append(value)
            else:
                found += expressions_of(value)
    elif isinstance(node, list):
        for item in node:
            found += expressions_of(item)
    return found


def metric_names(expression: str) -> set[str]:
    """The metric names an expression selects (label matchers, strings, durations and
    grouping clauses removed first)."""
    text = re.sub(r'"[^"]*"', "", expression)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", text)
    return {
        name
        for name in _IDENTIFIER.findall(text)
        if name not in _NOT_METRICS and not name.startswith("$") and "_" in name
    }


def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text(encoding="utf-8")))


def alert_rules() -> dict[str, Any]:
    return dict(yaml.safe_load(ALERTS.read_text(encoding="utf-8")))


def dashboard_metric_names() -> set[str]:
    names: set[str] = set()
    for expression in expressions_of(dashboard()) + expressions_of(alert_rules()):
        names |= metric_names(expression)
    return names


def exported_elsewhere() -> set[str]:
    """Families the reconstruction service and the gateway declare (importing their modules
    declares them; the reconstruction caches' are produced once a servicer is bound)."""
    import services.gateway.observed  # noqa: F401 - declares the gateway's HTTP families
    from services.reconstruction.servicer import bindings

    bindings()  # registers the cache families of a fresh servicer
    text = generate_latest(REGISTRY).decode("utf-8")
    return set(re.findall(r"^# TYPE (\S+) ", text, flags=re.MULTILINE))
