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
