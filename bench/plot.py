"""The candidate-latency plot: candidate read and in-process chain verification against journal
length, on log-log axes (a straight line of slope 1 is linear growth)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: render straight to the PNG

import matplotlib.pyplot as plt


def plot_candidate_latency(rows: Sequence[dict[str, Any]], path: Path) -> None:
    rows = [row for row in rows if "candidate" in row]
    lengths = [row["entries"] for row in rows]
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=100)
    for key, label in (
        ("candidate", "candidate read (p50, via gRPC)"),
        ("hashing_baseline", "in-process chain verification (p50)"),
    ):
        axes.plot(lengths, [row[key]["p50_ms"] for row in rows], marker="o", label=label)
        axes.fill_between(
            lengths,
            [row[key]["min_ms"] for row in rows],
            [row[key]["max_ms"] for row in rows],
            alpha=0.2,
        )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("journal length (entries)")
    axes.set_ylabel("latency (ms)")
    axes.set_title("Candidate latency against journal length")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)
