"""A real ledger process on PostgreSQL with its /metrics endpoint on and JSON logs: admissions
(one committed, one refused by the pending cap), a claim, a refused read and an open journal
follower, then one HTTP GET of /metrics. Every metric the traffic touched shows it; the log
lines are JSON objects carrying the run and request ids.

The scrape is shared with the dashboard check (deploy/grafana-dashboard.json names only
metrics a service exports).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from forge.continuity.v1 import ledger_pb2, ledger_pb2_grpc
from shared.contract.channels import open_channel
from shared.runtime.server import RunningServer
from tests.conftest import postgres_schema
from tests.ledger.admission_support import (
    claim_request,
    commit,
    commit_request,
    enable_policy,
    execution,
    seed,
)
from tests.ledger.conftest import LedgerClients
from tests.polyglot.process import _child_environment, _free_port, _serving
from tests.support import Served, principals_document

STARTUP_SECONDS = 60.0
LEDGER = "forge.continuity.v1.LedgerService"

#: (name, labels) -> value of every sample.
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@dataclass
class Scraped:
    samples: Samples
    #: Every family name the endpoint declared (# TYPE lines), samples or not.
    families: set[str]
    log_lines: list[str]

    def value(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples whose labels include ``labels``."""
        wanted = set(labels.items())
        found = [v for (n, ls), v in self.samples.items() if n == name and wanted <= ls]
        assert found, f"no sample {name} {labels}"
        return sum(found)


def parse(text: str) -> tuple[Samples, set[str]]:
    samples: Samples = {}
    families: set[str] = set()
    for family in text_string_to_metric_families(text):
        families.add(family.name)
        for sample in family.samples:
            samples[sample.name, frozenset(sample.labels.items())] = sample.value
    return samples, families


def scrape(port: int) -> str:
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        return str(reply.read().decode("utf-8"))


@pytest.fixture(scope="module")
def ledger_metrics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    workdir = tmp_path_factory.mktemp("metrics")
    with postgres_schema() as url:
        principals = workdir / "principals.json"
        principals.write_text(json.dumps(principals_document()), encoding="utf-8")
        port, metrics_port = _free_port(), _free_port()
        log_path = workdir / "ledger.log"
        env = {
            **_child_environment(),
            "FORGE_LEDGER_METRICS_PORT": str(metrics_port),
            "FORGE_LOG_FORMAT": "json",
        }
        arguments = ["--port", str(port), "--database-url", url]
        arguments += ["--principals-file", str(principals)]
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "services.ledger", *arguments],
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            target = f"127.0.0.1:{port}"
            deadline = time.monotonic() + STARTUP_SECONDS
            while not _serving(target):
                assert process.poll() is None, log_path.read_text(encoding="utf-8")
                assert time.monotonic() < deadline, "the ledger did not come up"
                time.sleep(0.1)
            samples, families = parse(_traffic_then_scrape(target, metrics_port))
        finally:
            process.terminate()
            process.wait(timeout=30)
        yield Scraped(samples, families, log_path.read_text(encoding="utf-8").splitlines())


def _traffic_then_scrape(target: str, metrics_port: int) -> str:
    clients = LedgerClients(Served(cast(RunningServer, None), target))
    first = seed(clients, "run-1")
    second = seed(clients, "run-2")
    enable_policy(clients, pending_ticket_limit=1)
    ticket = commit(clients, commit_request(clients, first)).ticket
    with pytest.raises(grpc.RpcError) as refused:
        commit(clients, commit_request(clients, second, request_id="req-2"))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    execution(clients).ClaimExecutionRequest(
        claim_request(clients, ticket.execution_request.execution_request_id)
    )
    with pytest.raises(grpc.RpcError):
        clients.ledger("reader-token").GetRun(ledger_pb2.GetRunRequest(run_id="no-such-run"))
    # One follower stays open while the endpoint is scraped.
    # Its own channel: closing it ends the follower whether the call is a grpc.Call or, with a
    # tracing interceptor installed in this process, the generator that interceptor returns.
    follower_channel = open_channel(target, "reader-token")
    follower = ledger_pb2_grpc.LedgerServiceStub(follower_channel).StreamJournal(
        ledger_pb2.StreamJournalRequest(run_id="run-1", from_sequence=1, follow=True),
        timeout=60,
    )
    first_entry = threading.Event()

    def follow() -> None:
        try:
            for _entry in follower:
                first_entry.set()
        except grpc.RpcError:
            pass  # cancelled below

    reader = threading.Thread(target=follow)
    reader.start()
    try:
        assert first_entry.wait(30)
        return scrape(metrics_port)
    finally:
        follower_channel.close()
        reader.join(timeout=30)


def test_every_rpc_is_counted_by_code_and_reason_and_timed(ledger_metrics: Scraped) -> None:
    handled = "forge_grpc_server_handled_total"
    assert ledger_metrics.value(handled, grpc_method="CommitAdmission", grpc_code="OK") == 1
    assert (
        ledger_metrics.value(
            handled,
            grpc_service=LEDGER,
            grpc_method="CommitAdmission",
            grpc_code="RESOURCE_EXHAUSTED",
            reason="PENDING_TICKET_LIMIT",
        )
        == 1
    )
    assert (
        ledger_metrics.value(
            handled, grpc_method="GetRun", grpc_code="NOT_FOUND", reason="RUN_NOT_FOUND"
        )
        == 1
    )
    assert ledger_metrics.value(handled, grpc_method="ClaimExecutionRequest", grpc_code="OK") == 1
    timed = "forge_grpc_server_handling_seconds_count"
    assert ledger_metrics.value(timed, grpc_method="CommitAdmission", grpc_type="unary") == 2
    assert ledger_metrics.value("forge_grpc_server_handling_seconds_sum") > 0


def test_the_ledger_reports_its_lock_caps_queue_followers_pool_and_schema(
    ledger_metrics: Scraped,
) -> None:
    value = ledger_metrics.value
    # Two admissions and one claim judged the policy under its row lock.
    assert value("forge_ledger_policy_lock_wait_seconds_count") >= 3
    # ... each holding it shared until its connection went back to the pool (ADR 0049), and the
    # admission that was admitted held the pending cap's counter row.
    assert value("forge_ledger_policy_lock_hold_seconds_count", mode="shared") >= 3
    assert value("forge_ledger_pending_slot_hold_seconds_count") >= 1
    assert value("forge_ledger_cap_refusals_total", reason="PENDING_TICKET_LIMIT") == 1
    assert value("forge_ledger_cap_refusals_total", reason="PER_RUN_TICKET_LIMIT") == 0
    assert value("forge_ledger_execution_requests", state="claimed") == 1
    assert value("forge_ledger_execution_requests", state="queued") == 0
    assert value("forge_ledger_pending_tickets") == 1
    assert value("forge_ledger_pending_ticket_limit") == 1
    assert value("forge_ledger_journal_followers_in_use") == 1
    assert value("forge_ledger_journal_followers_limit") >= 1
    assert value("forge_ledger_journal_streams_in_use") == 0
    assert value("forge_ledger_journal_streams_limit") >= 1
    assert value("forge_ledger_db_pool_capacity") == 10 + 40
    # Present (a follower holds a connection only while it reads, so 0 between its polls).
    assert value("forge_ledger_db_pool_in_use") >= 0
    assert value("forge_ledger_db_pool_waiting") == 0
    for cause in ("unique_conflict", "40001", "40P01"):
        assert value("forge_ledger_transaction_retries_total", cause=cause) >= 0
    for finding in ("head_unsigned", "signature_mismatch", "signed_beyond_head"):
        assert value("forge_ledger_journal_head_refusals_total", finding=finding) == 0
    info = [
        dict(labels)
        for (name, labels), _ in ledger_metrics.samples.items()
        if name == "forge_ledger_schema_info"
    ]
    assert len(info) == 1 and info[0]["revision"] == info[0]["required"] != ""
    assert value("forge_ledger_schema_revision") == int(info[0]["revision"])


def test_log_lines_are_json_objects_with_the_run_and_request_ids(ledger_metrics: Scraped) -> None:
    documents = [json.loads(line) for line in ledger_metrics.log_lines if line.strip()]
    assert documents
    for document in documents:
        assert {"timestamp", "level", "logger", "message"} <= set(document), document
    committed = [d for d in documents if d.get("event") == "admission"]
    assert committed, [d.get("event") for d in documents]
    assert committed[0]["run_id"] == "run-1" and committed[0]["request_id"] == "req-1"
    # A refusal logged while serving carries the served request's ids (bound per call).
    refused = [d for d in documents if "PENDING_TICKET_LIMIT" in d["message"]]
    assert refused and refused[0]["run_id"] == "run-2" and refused[0]["request_id"] == "req-2"
    assert refused[0]["reason"] == "PENDING_TICKET_LIMIT"
    assert refused[0]["grpc_method"] == f"/{LEDGER}/CommitAdmission"


def test_the_dashboard_names_only_exported_metrics(ledger_metrics: Scraped) -> None:
    from tests.deploy.dashboard import dashboard_metric_names, exported_elsewhere

    exported = ledger_metrics.families | exported_elsewhere()
    missing = sorted(dashboard_metric_names() - _with_suffixes(exported))
    assert not missing, f"the dashboard names metrics no service exports: {missing}"


def _with_suffixes(families: set[str]) -> set[str]:
    """Family names and the series names PromQL uses for them (counters' _total, histograms'
    _bucket / _count / _sum)."""
    names = set(families)
    for family in families:
        names |= {f"{family}{suffix}" for suffix in ("_total", "_bucket", "_count", "_sum")}
    return names
