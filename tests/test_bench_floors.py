"""The CPU a figure costs beside its floor, split by who spends it (bench.floors.CPU_SHARES): a
CPU ratio that misses its target says nothing of where to look until the servers', the
database's and the caller's parts are apart."""

from __future__ import annotations

from bench import floors
from bench.cpu import BENCH, POSTGRES, CpuUse
from bench.load import Latencies, Throughput


def _throughput(calls: int, by: dict[str, float]) -> Throughput:
    return Throughput(8, calls, 1.0, Latencies.of([0.001] * calls), CpuUse(by, sum(by.values())))


def test_every_process_but_the_caller_and_the_database_is_a_server() -> None:
    shares = floors.cpu_shares({"ledger": 1.5, "candidate": 0.5, POSTGRES: 0.7, BENCH: 0.3})
    assert shares == {"servers": 2.0, "postgres": 0.7, "caller": 0.3}
    assert floors.cpu_shares({}) == {"servers": 0.0, "postgres": 0.0, "caller": 0.0}


def test_a_statement_floor_sets_each_share_beside_its_own() -> None:
    """Per call on both sides: the floor ran 100 calls, the figure 50, so the same seconds are
    twice the CPU per call on the figure's side."""
    floor = _throughput(100, {"baseline": 0.1, POSTGRES: 0.05, BENCH: 0.02})
    figure = {"measured": _throughput(50, {"ledger": 0.1, POSTGRES: 0.1, BENCH: 0.01}).as_dict()}
    lines = floors.statement_floor_figure(floor, floor, figure, 5)
    assert lines["servers_cpu_ratio"] == 2.0
    assert lines["postgres_cpu_ratio"] == 4.0
    assert lines["caller_cpu_ratio"] == 1.0
    # the shares' ratios are summarized over rounds like the floor's other ratios
    assert {f"{share}_cpu_ratio" for share in floors.CPU_SHARES} <= set(
        floors._STATEMENT_FLOOR_RATIOS
    )


def test_the_admission_sets_each_share_beside_the_hop_floors() -> None:
    chain = _throughput(100, {"baseline": 0.2, "hop_front": 0.1, POSTGRES: 0.04, BENCH: 0.03})
    one_hop = _throughput(100, {"baseline": 0.1, POSTGRES: 0.04, BENCH: 0.03})
    admission = {
        "measured": _throughput(
            100, {"admission": 0.1, "ledger": 0.4, "candidate": 0.1, POSTGRES: 0.2, BENCH: 0.03}
        ).as_dict()
    }
    lines = floors.hop_floor_figure(chain, one_hop, admission)
    assert lines["admission_servers_cpu_ratio"] == 2.0
    assert lines["admission_postgres_cpu_ratio"] == 5.0
    assert lines["admission_caller_cpu_ratio"] == 1.0


def test_the_database_bound_puts_the_figures_database_work_on_the_floor() -> None:
    """The floor costs 1.0 ms a call (0.2 of it PostgreSQL's); a figure whose PostgreSQL spends
    0.6 ms a call bounds any design doing that work at 1.0 / (1.0 - 0.2 + 0.6) of the floor,
    whatever its own servers cost."""
    floor = _throughput(100, {"baseline": 0.07, POSTGRES: 0.02, BENCH: 0.01})
    for servers in (0.05, 0.5):
        figure = {
            "measured": _throughput(100, {"ledger": servers, POSTGRES: 0.06, BENCH: 0.02}).as_dict()
        }
        assert floors.statement_floor_figure(floor, floor, figure, 5)["database_bound"] == round(
            1.0 / 1.4, 3
        )
    # a figure whose database does no more than the floor's is not bounded by it
    same = {"measured": _throughput(100, {"ledger": 1.0, POSTGRES: 0.02, BENCH: 0.5}).as_dict()}
    assert floors.statement_floor_figure(floor, floor, same, 5)["database_bound"] == 1.0
    assert "database_bound" in floors._STATEMENT_FLOOR_RATIOS
    assert "admission_database_bound" in floors._FLOOR_RATIOS


def test_a_call_graph_floor_sets_the_admission_beside_it_process_by_process() -> None:
    """Where an admission's CPU goes beyond the floor of its own call graph, in ms a call: the
    floor ran 100 calls, the admission 50, so the same seconds are twice the CPU a call."""
    six_hops = _throughput(100, {"baseline": 0.2, "hop_front": 0.1, POSTGRES: 0.05, BENCH: 0.05})
    floor = _throughput(
        100, {"admission": 0.08, "candidate": 0.05, "ledger": 0.1, POSTGRES: 0.04, BENCH: 0.03}
    )
    admission = {
        "measured": _throughput(
            50, {"admission": 0.05, "candidate": 0.04, "ledger": 0.1, POSTGRES: 0.05, BENCH: 0.02}
        ).as_dict()
    }
    lines = floors.call_graph_floor_figure(floor, six_hops, admission)
    assert lines["cpu_ratio"] == 0.75  # 3.0 ms a call against the six-hop floor's 4.0
    assert lines["admission_cpu_ratio"] == round(5.2 / 3.0, 3)
    assert lines["admission_admission_cpu_ms_beyond"] == 0.2
    assert lines["admission_candidate_cpu_ms_beyond"] == 0.3
    assert lines["admission_ledger_cpu_ms_beyond"] == 1.0
    assert lines[f"admission_{POSTGRES}_cpu_ms_beyond"] == 0.6
    assert lines[f"admission_{BENCH}_cpu_ms_beyond"] == 0.1
    # every one of them is summarized over the rounds, like the other floors' ratios
    assert {key for key in lines if key != "measured"} <= set(floors._CALL_GRAPH_FLOOR_RATIOS)
