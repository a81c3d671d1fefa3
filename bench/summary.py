"""The lines ``make bench`` prints and writes as ``summary``: one per figure, and for every ratio
measured in paired rounds its median with ``<key>_spread``, ``<key>_rounds`` and, when it has a
target, ``<key>_verdict`` (met, missed or straddles: bench.paired)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench import policy_lock
from bench.floors import CALL_GRAPH_PROCESSES, CPU_SHARES
from bench.load import median
from bench.paired import spread_lines

# Round 4 restated the admission targets against the six-hop floor measured in the same run (the
# physical limit of four services in their own processes; docs/performance-history.md, round 4): the
# one-hop ratios (admission_throughput_ratio, admission_p99_ratio) are still printed, untargeted.
# Round 5 (issue 50 §2) set the worker path beside its statement floor.
TARGETS = {
    "admission_to_six_hop_floor_ratio": ">= 0.5",
    "admission_p99_to_floor_ratio": "<= 3",
    "admission_cpu_to_floor_ratio": "<= 2",
    "candidate_100000_ratio": "<= 2 (and linear growth)",  # ADR 0035: out of reach
    "append_throughput_ratio": ">= 0.7",
    "rss_peak_ratio": "<= 1.10",
    "worker_path_throughput_ratio": ">= 0.7",
    "worker_path_to_statement_floor_ratio": ">= 0.85",
    # the bound the path's database work puts on that ratio, judged against the same target
    # (ADR 0061): a design doing that work cannot meet the target where its bound misses it
    "worker_path_database_bound_ratio": ">= 0.85",
    "followers_append_ratio": ">= 0.8",
    "replicas_worker_path_ratio": ">= 0.9",
}


def paired(key: str, values: Sequence[float]) -> dict[str, Any]:
    """A paired ratio's lines, judged against its target when it has one."""
    return spread_lines(key, values, TARGETS.get(key))


def paired_each(values_by_key: Mapping[str, Sequence[float]]) -> dict[str, Any]:
    """``paired`` for each key and its rounds' values, all lines together."""
    return {
        line: value
        for key, values in values_by_key.items()
        for line, value in paired(key, values).items()
    }


def _five_hop_lines(admission: dict[str, Any]) -> dict[str, Any]:
    """The admission beside the floor of the five hops it crosses since ADR 0024 (untargeted:
    the targets name the six-hop floor)."""
    crossed = admission["hops_crossed_floor"]
    return {
        "admission_to_five_hop_floor_ratio": crossed["admission_ratio"],
        "admission_p99_to_five_hop_floor_ratio": crossed["admission_p99_ratio"],
        "admission_cpu_to_five_hop_floor_ratio": crossed["admission_cpu_ratio"],
    }


def _statement_floor_lines(admission: dict[str, Any]) -> dict[str, Any]:
    """The six-hop statement floor (untargeted): how close to the six-hop floor any design that
    runs an admission's statements could come, and the admission beside it."""
    floor = admission["statement_floor"]
    return {
        "six_hop_statement_floor_to_six_hop_floor_ratio": floor["throughput_ratio"],
        "six_hop_statement_floor_cpu_to_six_hop_floor_ratio": floor["cpu_ratio"],
        "admission_to_six_hop_statement_floor_ratio": floor["measured_ratio"],
        "admission_cpu_to_six_hop_statement_floor_ratio": floor["measured_cpu_ratio"],
    }


def _call_graph_floor_lines(admission: dict[str, Any]) -> dict[str, Any]:
    """The two floors of the admission's own call graph (untargeted; bench.runtime_floor): each
    one's CPU beside the six-hop floor's, the admission's CPU beside the runtime floor's, and
    where the admission's CPU beyond the runtime floor goes, process by process (ms a call)."""
    bare = admission["bare_floor"]["per_round"]
    runtime = admission["runtime_floor"]["per_round"]
    return {
        **paired("bare_floor_cpu_to_six_hop_floor_ratio", bare["cpu_ratio"]),
        **paired("runtime_floor_cpu_to_six_hop_floor_ratio", runtime["cpu_ratio"]),
        **paired("runtime_floor_to_six_hop_floor_ratio", runtime["throughput_ratio"]),
        **paired("admission_cpu_to_runtime_floor_ratio", runtime["admission_cpu_ratio"]),
        **paired_each(
            {
                f"admission_cpu_ms_beyond_runtime_floor_in_{name}": runtime[
                    f"admission_{name}_cpu_ms_beyond"
                ]
                for name in CALL_GRAPH_PROCESSES
            }
        ),
    }


def admission_summary(results: dict[str, Any]) -> dict[str, Any]:
    admission = results["admission"]
    measured = admission["measured"]
    six_hops = admission["hop_floor"]["per_round"]
    return {
        "admission_throughput_ratio": admission["throughput_ratio"],
        "admission_p99_ratio": admission["p99_ratio"],
        "admission_cpu_bound_ceiling": admission["cpu_bound_ceiling"],
        "admission_cpu_ms_per_call": measured["cpu_ms_per_call"]["attributed"],
        "admission_service_cpu_ms_per_call": measured["cpu_ms_per_call"]["by"]["admission"],
        **paired("six_hop_floor_throughput_ratio", six_hops["throughput_ratio"]),
        **paired("admission_to_six_hop_floor_ratio", six_hops["admission_ratio"]),
        **paired("admission_p99_to_floor_ratio", six_hops["admission_p99_ratio"]),
        **paired("admission_cpu_to_floor_ratio", six_hops["admission_cpu_ratio"]),
        # untargeted: the CPU ratio split by who spends it (the services, PostgreSQL, the caller)
        **paired_each(
            {
                f"admission_{share}_cpu_to_floor_ratio": six_hops[f"admission_{share}_cpu_ratio"]
                for share in CPU_SHARES
            }
        ),
        # the best admission_to_six_hop_floor_ratio a design doing the admission's database work
        # could reach (bench.floors.cpu_beside)
        **paired("admission_database_bound_ratio", six_hops["admission_database_bound"]),
        **_five_hop_lines(admission),
        **_statement_floor_lines(admission),
        **(_call_graph_floor_lines(admission) if "runtime_floor" in admission else {}),
    }


def append_lines(figure: dict[str, Any]) -> dict[str, Any]:
    """Figure 3 of one run: appends beside the one-hop baseline, by throughput and by CPU."""
    return {
        **paired("append_throughput_ratio", figure["per_round"]["throughput_ratio"]),
        **paired("append_cpu_ratio", figure["per_round"]["cpu_ratio"]),
        "append_cpu_bound_ceiling": figure["cpu_bound_ceiling"],
    }


def append_summary(results: dict[str, Any]) -> dict[str, Any]:
    """``python -m bench append``: the median of the separate runs' figures is the figure; its
    spread and rounds are those of every round of every run."""
    runs = results["append_runs"]
    ratios = [run["throughput_ratio"] for run in runs]
    every_round = [value for run in runs for value in run["per_round"]["throughput_ratio"]]
    every_cpu = [value for run in runs for value in run["per_round"]["cpu_ratio"]]
    return {
        **paired("append_throughput_ratio", every_round),
        "append_throughput_ratio": median(ratios),
        "append_throughput_ratio_lowest_run": min(ratios),
        "append_throughput_ratio_highest_run": max(ratios),
        **paired("append_cpu_ratio", every_cpu),
        "append_cpu_bound_ceiling": median([run["cpu_bound_ceiling"] for run in runs]),
    }


def replicas_summary(results: dict[str, Any]) -> dict[str, Any]:
    figure = results["replicas"]
    return {
        **paired("replicas_worker_path_ratio", figure["per_round"]["throughput_ratio"]),
        # two replicas' CPU per step over one's
        **paired("replicas_worker_path_cpu_ratio", figure["per_round"]["cpu_ratio"]),
        # untargeted: the round that warmed both replicas (the second one's first calls)
        "replicas_cold_round_ratio": figure["cold_round"]["throughput_ratio"],
        "replicas_policy_lock_wait_ms_per_step_one": figure["policy_lock_wait_ms_per_step_one"],
        "replicas_policy_lock_wait_ms_per_step_two": figure["policy_lock_wait_ms_per_step_two"],
    }


def worker_path_summary(results: dict[str, Any]) -> dict[str, Any]:
    figure = results["worker_path"]
    statement_floor = figure["statement_floor"]["per_round"]
    return {
        **paired("worker_path_throughput_ratio", figure["per_round"]["throughput_ratio"]),
        "worker_path_p99_ratio": figure["p99_ratio"],
        "worker_path_cpu_bound_ceiling": figure["cpu_bound_ceiling"],
        "worker_path_requests_per_second": figure["requests_per_second"],
        # the best worker_path_throughput_ratio a design running a step's statements could
        # reach here, and the worker path beside that statement floor (by throughput and CPU)
        "worker_statement_floor_throughput_ratio": figure["statement_floor"]["throughput_ratio"],
        **paired("worker_path_to_statement_floor_ratio", statement_floor["measured_ratio"]),
        **paired("worker_path_cpu_to_statement_floor_ratio", statement_floor["measured_cpu_ratio"]),
        # untargeted: that CPU ratio split by who spends it (the ledger against the floor's bare
        # server, PostgreSQL, the workers' own process against the floor's callers)
        **paired_each(
            {
                f"worker_path_{share}_cpu_to_statement_floor_ratio": statement_floor[
                    f"{share}_cpu_ratio"
                ]
                for share in CPU_SHARES
            }
        ),
        # the best worker_path_to_statement_floor_ratio a design doing the path's database work
        # could reach (bench.floors.cpu_beside), judged against that ratio's target
        **paired("worker_path_database_bound_ratio", statement_floor["database_bound"]),
        **{
            f"worker_step_p50_ms_at_{row['entries']}": row["step"]["p50_ms"]
            for row in results.get("worker_path_long_runs", [])
        },
        **(replicas_summary(results) if "replicas" in results else {}),
    }


def followers_summary(results: dict[str, Any]) -> dict[str, Any]:
    figure = results["followers"]
    return {
        **paired("followers_append_ratio", figure["per_round"]["followers_append_ratio"]),
        # CPU per append with the followers (their processes included) over without
        **paired("followers_append_cpu_ratio", figure["per_round"]["followers_append_cpu_ratio"]),
        "followers_delivery_p50_ms": figure["followers_delivery_p50_ms"],
        "followers_delivery_p99_ms": figure["followers_delivery_p99_ms"],
        "followers_one_entry_a_message_append_ratio": figure[
            "one_entry_a_message_followers_append_ratio"
        ],
        "followers_one_entry_a_message_delivery_p99_ms": figure[
            "one_entry_a_message_followers_delivery_p99_ms"
        ],
        "followers_faulty": figure["faulty_followers"],
    }


def candidate_summary(results: dict[str, Any]) -> dict[str, Any]:
    """The longest journal's repeated reads, each over the hashing run beside it (the median of
    those pairs since round 5; before, the p50 of the reads over the p50 of the hashing)."""
    candidate = {row["entries"]: row for row in results["candidate"] if "candidate" in row}
    longest = candidate[max(candidate)]
    entries = longest["entries"]
    return {
        **paired(f"candidate_{entries}_ratio", longest["paired_ratios"]),
        f"candidate_{entries}_first_read_ratio": longest["first_read_ratio"],
    }


def policy_lock_summary(results: dict[str, Any]) -> dict[str, Any]:
    """One line per load and measure: throughputs, and each ledger's wait and hold by mode."""
    lines: dict[str, Any] = {}
    for load, figure in results["policy_lock"].items():
        for name, value in figure.items():
            if "per_second" in value:
                lines[f"{load}_{name}_per_second"] = value["per_second"]
                for process, ms in value["cpu_ms_per_call"].get("by", {}).items():
                    lines[f"{load}_{name}_cpu_ms_{process}"] = ms
                continue
            for measure in policy_lock.MEASURES:
                for mode, row in value[measure].items():
                    tag = mode.replace('mode="', "").replace('"', "")
                    lines[f"{load}_{name}_{measure}_{tag}_mean_ms"] = row["mean_ms"]
                    lines[f"{load}_{name}_{measure}_{tag}_p99_bound_ms"] = row["p99_bound_ms"]
                    lines[f"{load}_{name}_{measure}_{tag}_locks"] = row["locks"]
    return lines


def listing_summary(results: dict[str, Any]) -> dict[str, Any]:
    listing = results["listing"]
    return {
        f"list_runs_{listing['runs']}_first_page_p50_ms": listing["first_page"]["p50_ms"],
        f"list_runs_{listing['runs']}_held_page_p50_ms": listing["held_page"]["p50_ms"],
        f"list_runs_{listing['runs']}_held_since_page_p50_ms": listing["held_since_page"]["p50_ms"],
        f"list_runs_{listing['runs']}_page_20_p50_ms": listing["page_20"]["p50_ms"],
        "list_queued_requests_page_p50_ms": listing["queued_requests_page"]["p50_ms"],
    }


def summary(results: dict[str, Any]) -> dict[str, Any]:
    """The full run's lines. ``rss_peak_ratio`` is one long phase, not rounds: its spread is
    that of consecutive runs (``make bench-repeat``)."""
    return {
        **admission_summary(results),
        **candidate_summary(results),
        **append_lines(results["append"]),
        "reconstruction_cold_ratio": results["reconstruction"]["cold_ratio_p50"],
        "reconstruction_warm_ratio": results["reconstruction"]["warm_ratio_p50"],
        "rss_peak_ratio": results["memory"]["worst_peak_ratio"],
        **worker_path_summary(results),
        **followers_summary(results),
    }
