"""The floors a throughput figure is set beside, and its rounds.

A figure's ratios are only as good as the baseline measured right beside it: each round pairs
the figure with its baselines (the one-hop baseline, the floor of the gRPC hops an admission
crosses, the floor of the statements a write runs), timed back to back in alternating order
(bench.paired), and ``over_rounds`` reports the median over the rounds with the ranges and every
round's ratios. The figures themselves are measured in ``bench.figures``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from bench.cpu import BENCH, POSTGRES
from bench.load import Throughput, median, ratio

# The gRPC hops one admission crosses: caller → admission; admission → ledger (read-back),
# → candidate, → ledger (commit); candidate → ledger (snapshot), → reconstruction.
ADMISSION_HOPS = 6
# Since ADR 0024 (no read back before the candidate) a first admission crosses five hops: the
# floor of the hops it really crosses is measured beside the six-hop floor the targets name.
ADMISSION_HOPS_NOW = 5


# Who spends a figure's CPU, as the floors' and the figure's processes split it (bench.cpu): the
# caller (the bench process), PostgreSQL, and the servers (every other process: the services, or
# the floor's bare server and hop front).
CPU_SHARES = ("servers", "postgres", "caller")


def cpu_shares(by: Mapping[str, float]) -> dict[str, float]:
    """CPU per call split into CPU_SHARES."""
    caller, postgres = by.get(BENCH, 0.0), by.get(POSTGRES, 0.0)
    servers = sum(ms for name, ms in by.items() if name not in (BENCH, POSTGRES))
    return {"servers": servers, "postgres": postgres, "caller": caller}


def hop_floor_figure(
    chain: Throughput, floor: Throughput, admission: dict[str, Any], hops: int = ADMISSION_HOPS
) -> dict[str, Any]:
    """The ``hops``-hop floor beside the one-hop baseline (the best throughput ratio a design
    with that many hops could reach here) and the admission beside that floor."""
    measured = admission["measured"]
    return {
        "hops": hops,
        "measured": chain.as_dict(),
        "throughput_ratio": ratio(chain.per_second, floor.per_second),
        "p99_ratio": ratio(chain.latencies.p99_ms, floor.latencies.p99_ms),
        # The admission beside the floor (round 4's restated targets: throughput >= 0.5,
        # p99 <= 3, CPU per call <= 2).
        "admission_ratio": ratio(measured["per_second"], chain.per_second),
        "admission_p99_ratio": ratio(measured["latency"]["p99_ms"], chain.latencies.p99_ms),
        "admission_cpu_ratio": ratio(
            measured.get("cpu_ms_per_call", {}).get("attributed", 0.0), chain.cpu_ms_per_call
        ),
        **{f"admission_{key}": value for key, value in cpu_beside(measured, chain).items()},
    }


# Statements one write runs on PostgreSQL (tests/ledger/test_statement_counts.py pins the
# writes): an admission reads the snapshot of a run whose journal the candidate holds (1 since
# round 4's eleventh pass, ADR 0032; 4 before) and commits (4; 11 before round 4's fifth pass,
# ADR 0027); a worker-path step runs 5 on average (a claim 5, four own records 5 each, two
# command charges 5 each, a completion 5, over eight steps; 6.75 before round 4's twelfth
# pass, 5.125 before round 5 read the completion's certification with its effects); with the
# worker's GetRun before each claim, 5.125 a step (1 statement, 3 before round 5), on a signing
# ledger too, as the timed figure runs it (each write's signed head rides in its statement, ADR
# 0060; bench/hops_worker.py counts every step). A
# statement floor runs that many single-row inserts, the cheapest statement
# there is, in one transaction (bench.baseline --statements): a lower bound on what any design
# that runs those statements costs on this machine.
ADMISSION_STATEMENTS = 5
WORKER_STEP_STATEMENTS = 5


def _cpu_by(measured: Mapping[str, Any]) -> Mapping[str, float]:
    """A measured window's CPU per call (``Throughput.as_dict()``), by process."""
    by: Mapping[str, float] = measured.get("cpu_ms_per_call", {}).get("by", {})
    return by


def _shares(measured: Mapping[str, Any]) -> dict[str, float]:
    """A measured window's CPU per call (``Throughput.as_dict()``), split into CPU_SHARES."""
    return cpu_shares(_cpu_by(measured))


def cpu_beside(measured: Mapping[str, Any], floor: Throughput) -> dict[str, float]:
    """The ``measured`` figure's CPU per call over ``floor``'s, share by share
    (``<share>_cpu_ratio``), and its ``database_bound``: the best throughput ratio to ``floor``
    a design could reach whose servers and caller cost no more than the floor's and whose
    database does the figure's work, the floor's CPU per call over that design's (the floor's,
    with its PostgreSQL share replaced by the figure's). Every window here keeps the two cores
    about equally busy (1.5 to 1.7 of 2), so a throughput ratio follows the inverse CPU ratio;
    where the bound sits below a target, only less work in the database can meet it (ADR
    0061)."""
    mine, theirs = _shares(measured), _shares(floor.as_dict())
    total = sum(theirs.values())
    return {
        **{f"{share}_cpu_ratio": ratio(mine[share], theirs[share]) for share in CPU_SHARES},
        "database_bound": ratio(total, total - theirs["postgres"] + mine["postgres"]),
    }


def statement_floor_figure(
    statements: Throughput, fewer: Throughput, figure: dict[str, Any], count: int
) -> dict[str, Any]:
    """The floor of ``count`` statements beside the floor it extends (``fewer``: the same hops
    with the one-statement transaction): its throughput ratio is the best ratio to ``fewer`` any
    design running those statements could reach here, its CPU ratio the least. The measured
    ``figure`` is set beside it too, with its CPU per call over the floor's split by who spent it
    (``<share>_cpu_ratio``): where a figure's CPU exceeds its floor's, the servers' own work, the
    database's or the caller's."""
    measured = figure["measured"]
    return {
        **cpu_beside(measured, statements),
        "statements": count,
        "measured": statements.as_dict(),
        "throughput_ratio": ratio(statements.per_second, fewer.per_second),
        "cpu_ratio": ratio(statements.cpu_ms_per_call, fewer.cpu_ms_per_call),
        "measured_ratio": ratio(measured["per_second"], statements.per_second),
        "measured_cpu_ratio": ratio(
            measured.get("cpu_ms_per_call", {}).get("attributed", 0.0), statements.cpu_ms_per_call
        ),
    }


# The processes whose CPU an admission's call-graph floor is compared with, process by process.
CALL_GRAPH_PROCESSES = ("admission", "candidate", "ledger", POSTGRES, BENCH)


def call_graph_floor_figure(
    floor: Throughput, six_hops: Throughput, figure: dict[str, Any]
) -> dict[str, Any]:
    """A floor of the admission's own call graph (bench.runtime_floor: its four hops, its
    messages, no domain work) beside the six-hop floor, and the admission beside it: its CPU
    over the floor's, and what it spends beyond the floor's, process by process (ms a call)."""
    mine, theirs = _cpu_by(figure["measured"]), _cpu_by(floor.as_dict())
    attributed = figure["measured"].get("cpu_ms_per_call", {}).get("attributed", 0.0)
    return {
        "measured": floor.as_dict(),
        "throughput_ratio": ratio(floor.per_second, six_hops.per_second),
        "cpu_ratio": ratio(floor.cpu_ms_per_call, six_hops.cpu_ms_per_call),
        "admission_cpu_ratio": ratio(attributed, floor.cpu_ms_per_call),
        **{
            f"admission_{name}_cpu_ms_beyond": round(mine.get(name, 0.0) - theirs.get(name, 0.0), 3)
            for name in CALL_GRAPH_PROCESSES
        },
    }


# Throughput figures are measured in this many paired rounds, each right beside its own
# baselines: at 9 (5 before ADR 0063, 3 before round 5) a figure's spread is its second lowest
# and second highest round, a 96.1 % interval for its median (bench.paired).
# FORGE_BENCH_ROUNDS sets it (at least 1; a smoke run may take 2).
ROUNDS = max(1, int(os.environ.get("FORGE_BENCH_ROUNDS", "9")))
# The ratios summarized over the rounds (median and range), at the figure's top level and in
# its six-hop floor.
_RATIOS = ("throughput_ratio", "p99_ratio", "cpu_bound_ceiling", "cpu_ratio")
_FLOOR_RATIOS = (
    "throughput_ratio",
    "p99_ratio",
    "admission_ratio",
    "admission_p99_ratio",
    "admission_cpu_ratio",
    *(f"admission_{share}_cpu_ratio" for share in CPU_SHARES),
    "admission_database_bound",
)


_STATEMENT_FLOOR_RATIOS = (
    "throughput_ratio",
    "cpu_ratio",
    "measured_ratio",
    "measured_cpu_ratio",
    *(f"{share}_cpu_ratio" for share in CPU_SHARES),
    "database_bound",
)
_CALL_GRAPH_FLOOR_RATIOS = (
    "throughput_ratio",
    "cpu_ratio",
    "admission_cpu_ratio",
    *(f"admission_{name}_cpu_ms_beyond" for name in CALL_GRAPH_PROCESSES),
)
# The floors a figure carries beside its baseline, with the ratios summarized in each.
_NESTED_RATIOS = {
    "hop_floor": _FLOOR_RATIOS,
    "hops_crossed_floor": _FLOOR_RATIOS,
    "statement_floor": _STATEMENT_FLOOR_RATIOS,
    "bare_floor": _CALL_GRAPH_FLOOR_RATIOS,
    "runtime_floor": _CALL_GRAPH_FLOOR_RATIOS,
}


def _summarized(
    chosen: dict[str, Any], rounds: list[dict[str, Any]], keys: tuple[str, ...]
) -> dict[str, Any]:
    """``chosen`` with each of ``keys`` replaced by its median over ``rounds``, the ranges, and
    each round's value in round order (``per_round``: what a summary's spread is made of)."""
    summary = dict(chosen)
    summary["ranges"] = {}
    summary["per_round"] = {}
    for key in keys:
        values = [float(round_[key]) for round_ in rounds]
        summary[key] = round(median(values), 3)
        summary["ranges"][key] = [min(values), max(values)]
        summary["per_round"][key] = values
    return summary


def over_rounds(
    one_round: Callable[[int], dict[str, Any]], rounds: int | None = None
) -> dict[str, Any]:
    """Run a throughput figure in ``rounds`` rounds, each measuring the figure right beside its
    baseline: this machine drifts from one minute to the next (the same bare baseline has cost
    1.4 to 2.0 ms of CPU per call in different runs), so a ratio is only as good as the pair it
    comes from. Each ratio is the median over the rounds, with its range; the round with the
    median throughput ratio is reported whole, and every round in ``rounds``."""
    measured = [one_round(index) for index in range(ROUNDS if rounds is None else rounds)]
    ordered = sorted(measured, key=lambda figure: float(figure["throughput_ratio"]))
    figure = _summarized(ordered[len(ordered) // 2], measured, _RATIOS)
    for key, ratios in _NESTED_RATIOS.items():
        if key in figure:
            floors = [round_[key] for round_ in measured]
            figure[key] = _summarized(figure[key], floors, ratios)
    figure["rounds"] = [
        {
            "measured_per_second": round_["measured"]["per_second"],
            "baseline_per_second": round_["baseline"]["per_second"],
            **{key: round_[key] for key in _RATIOS},
            **(
                {f"hop_floor_{key}": round_["hop_floor"][key] for key in _FLOOR_RATIOS}
                if "hop_floor" in round_
                else {}
            ),
        }
        for round_ in measured
    ]
    return figure


def throughput_figure(measured: Throughput, floor: Throughput) -> dict[str, Any]:
    return {
        "measured": measured.as_dict(),
        "baseline": floor.as_dict(),
        "throughput_ratio": ratio(measured.per_second, floor.per_second),
        "p99_ratio": ratio(measured.latencies.p99_ms, floor.latencies.p99_ms),
        # The throughput ratio a CPU-bound run could reach at best: the CPU one baseline call
        # costs (server, PostgreSQL, caller) over the CPU one measured call costs.
        "cpu_bound_ceiling": ratio(floor.cpu_ms_per_call, measured.cpu_ms_per_call),
        # The CPU one measured call costs over the CPU one baseline call costs (all processes,
        # from the kernel's accounting): the ceiling's inverse, reported in the orientation of
        # admission_cpu_to_floor_ratio and with its own spread.
        "cpu_ratio": ratio(measured.cpu_ms_per_call, floor.cpu_ms_per_call),
    }
