"""Every figure of ``make bench`` runs against the real services at its smallest size.

A change elsewhere can break the bench unseen: once the reconstruction service accepted only the
candidate service's identity, the bench's reconstruction figure was refused (UNAUTHENTICATED) and
``make bench`` stopped at its first figure. These tests take each figure through its calls once,
with the credentials and processes the bench uses, and check the shape of what it records;
tests/test_bench_smoke.py runs the whole bench as ``make bench`` does, at its smallest size."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from bench import figures, floors, followers, summary, worker_path
from bench.stack import Services, baseline_server, services, vacuum_schema
from tests.conftest import postgres_schema
from tests.support import owner_url

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def running() -> Iterator[tuple[str, Services]]:
    # postgres_schema skips (or fails under CI) when PostgreSQL is unreachable
    with postgres_schema() as url, services(url) as started:
        figures.Clients(started).set_policy()
        yield url, started


def test_reconstruction_figure_calls_with_the_identity_reconstruction_serves(
    running: tuple[str, Services],
) -> None:
    measured = figures.reconstruction_latency(figures.Clients(running[1]), 1)
    assert measured["cold"]["count"] == 1 and measured["warm"]["count"] == 1
    assert measured["cold_ratio_p50"] > 0


def test_admission_append_and_worker_figures_complete_their_calls(
    running: tuple[str, Services],
) -> None:
    clients = figures.Clients(running[1])
    admitted = figures.admission_throughput(clients, 1, prefix="smoke-admit")
    appended = figures.append_throughput(clients, 2, prefix="smoke-append")
    stepped = worker_path.worker_path_throughput(clients, 1, prefix="smoke-worker")
    assert admitted.calls == figures.CALLERS
    assert appended.calls == 2 * figures.CALLERS
    assert stepped.calls == len(worker_path.STEPS) * figures.CALLERS


def test_candidate_figure_reads_a_seeded_long_run(running: tuple[str, Services]) -> None:
    url, started = running
    rows = figures.candidate_latency(figures.Clients(started), url, (100,), {100: 1})
    assert [row["entries"] for row in rows] == [100]
    # (held: figure 2's padded runs are held candidates, which do every read an eligible one does)
    assert rows[0]["failed_first_reads"] == []
    assert rows[0]["candidate"]["count"] == 1 and rows[0]["first_read_ratio"] > 0


def test_followers_figure_delivers_every_entry_once() -> None:
    with (
        postgres_schema() as url,
        services(url, ledger_replicas=followers.REPLICAS, env_extra=followers.PROCESS_ENV) as up,
    ):
        figure = followers.followers_figure(figures.Clients(up), 2, rounds=1)
    assert figure["faulty_followers"] == 0


def test_a_statement_floor_runs_its_statements_in_each_call() -> None:
    """The statement floors (bench.baseline --statements) insert one row per statement: a floor
    that silently ran fewer would flatter the statement-floor lines."""
    # The baseline is no ledger: it creates its own table, as the schema's owner.
    with postgres_schema() as ledger_url, baseline_server(owner_url(ledger_url), 4) as floor:
        measured = figures.baseline_floor(floor, 2)
        with create_engine(owner_url(ledger_url)).connect() as connection:
            rows = connection.execute(text("SELECT count(*), max(part) FROM bench_floor")).one()
    # two calls per caller plus one warm-up call each, four single-row statements a call (the
    # one-statement floor inserts three rows a call)
    assert measured.calls == 2 * figures.CALLERS
    assert tuple(rows) == (3 * 4 * figures.CALLERS, 3)
    figure = floors.statement_floor_figure(measured, measured, {"measured": measured.as_dict()}, 3)
    assert figure["statements"] == 3 and figure["throughput_ratio"] == 1.0


def test_the_admission_figure_reports_its_targeted_ratios_with_their_spreads(
    running: tuple[str, Services], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Figure 1 as ``make bench`` measures it, at its smallest size and in two rounds: each
    targeted ratio comes with the spread and count of its rounds and a verdict."""
    from bench.__main__ import admission_figure  # the bench's entry point, imported to call

    url, started = running
    monkeypatch.setattr(floors, "ROUNDS", 2)
    # The baselines are no ledger: they create their own table, as the schema's owner.
    with (
        baseline_server(owner_url(url)) as baseline,
        baseline_server(owner_url(url), floors.ADMISSION_STATEMENTS) as statements,
    ):
        figure = admission_figure(
            figures.Clients(started), baseline, statements, 0.01, owner_url(url)
        )
    lines = summary.admission_summary({"admission": figure})
    for key in (
        "admission_to_six_hop_floor_ratio",
        "admission_p99_to_floor_ratio",
        "admission_cpu_to_floor_ratio",
    ):
        assert lines[f"{key}_rounds"] == 2
        low, high = lines[f"{key}_spread"]
        assert 0 < low <= lines[key] <= high
        assert lines[f"{key}_verdict"] in {"met", "missed", "straddles"}
    # beside them, untargeted, the floors of the admission's own call graph (ADR 0068)
    for key in (
        "bare_floor_cpu_to_six_hop_floor_ratio",
        "runtime_floor_cpu_to_six_hop_floor_ratio",
        "admission_cpu_to_runtime_floor_ratio",
        "admission_cpu_ms_beyond_runtime_floor_in_ledger",
    ):
        assert lines[f"{key}_rounds"] == 2
        assert f"{key}_verdict" not in lines
    assert lines["runtime_floor_cpu_to_six_hop_floor_ratio"] > 0
    assert len(figure["rounds"]) == 2


def test_vacuuming_a_schema_vacuums_and_analyzes_each_of_its_tables_only() -> None:
    """The full bench vacuums its schema between figures (bench.stack.vacuum_schema), as
    autovacuum would: every table of that schema, and nothing of another schema."""
    with postgres_schema() as one, postgres_schema() as other:
        url = owner_url(one)
        with create_engine(url).begin() as connection:
            connection.execute(text("CREATE TABLE churn (id integer PRIMARY KEY, n integer)"))
            connection.execute(text("INSERT INTO churn SELECT g, 0 FROM generate_series(1, 200) g"))
            connection.execute(text("UPDATE churn SET n = n + 1"))
        found = vacuum_schema(url)
        stats = (
            "SELECT count(*), count(last_vacuum), count(last_analyze) FROM pg_stat_user_tables"
            " WHERE schemaname = current_schema()"
        )
        with create_engine(url).connect() as connection:
            tables, vacuumed, analyzed = connection.execute(text(stats)).one()
        with create_engine(owner_url(other)).connect() as connection:
            _, untouched, _ = connection.execute(text(stats)).one()
    assert tables > 1 and vacuumed == tables and analyzed == tables
    assert untouched == 0
    assert found["dead_rows"] >= 0 and found["seconds"] >= 0
