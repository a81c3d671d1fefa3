"""deploy/grafana-dashboard.json is a Grafana dashboard and deploy/prometheus-alerts.yaml a
Prometheus rule file; that every metric they name is exported is checked against a real
ledger's /metrics in tests/ledger/test_metrics_endpoint.py."""

from __future__ import annotations

from tests.deploy.dashboard import (
    alert_rules,
    dashboard,
    dashboard_metric_names,
    expressions_of,
    metric_names,
)


def test_the_dashboard_is_grafana_dashboard_json() -> None:
    document = dashboard()
    assert document["uid"] and document["title"] and isinstance(document["schemaVersion"], int)
    variables = {v["name"]: v for v in document["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    panels = document["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs))
        for target in panel["targets"]:
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
            assert metric_names(target["expr"]), target["expr"]


def test_every_alert_has_an_expression_a_duration_and_a_meaning() -> None:
    rules = [rule for group in alert_rules()["groups"] for rule in group["rules"]]
    assert len({rule["alert"] for rule in rules}) == len(rules)
    for rule in rules:
        assert rule["expr"] and rule["for"] and rule["labels"]["severity"], rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_metric_names_are_found_in_expressions() -> None:
    expression = (
        "histogram_quantile(0.99, sum by (le, grpc_method) "
        '(rate(forge_a_seconds_bucket{job=~"$job",grpc_code!="OK"}[5m]))) '
        "/ clamp_min(max(forge_b_total) + forge_c, 1e-9)"
    )
    assert metric_names(expression) == {"forge_a_seconds_bucket", "forge_b_total", "forge_c"}
    assert {"forge_ledger_pending_tickets", "forge_grpc_server_handled_total"} <= (
        dashboard_metric_names()
    )
    assert expressions_of({"a": [{"expr": "x"}, {"b": {"expr": "y"}}]}) == ["x", "y"]
