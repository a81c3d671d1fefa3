"""Where the CPU of a timed window went: the named processes (services, the baseline server),
PostgreSQL (its own processes and the client backends of the bench's database), the bench process
itself, and the whole machine.

On two cores a figure that keeps both cores busy is bounded by CPU, not by waiting: then the CPU
one call costs, beside the CPU one baseline call costs, says how far any scheduling or locking
change could move the throughput ratio (``cpu_bound_ceiling``). Times come from ``/proc`` (clock
ticks, 10 ms on Linux), so a window should last seconds, not milliseconds.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

TICK = os.sysconf("SC_CLK_TCK")
POSTGRES = "postgres"
BENCH = "bench"
# The PostgreSQL the bench measures on (bench.stack); only its database's client backends are
# charged to a window, beside the server's own processes.
POSTGRES_URL = os.environ.get(
    "FORGE_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
DATABASE = make_url(POSTGRES_URL).database


def _process_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    # utime and stime are the 14th and 15th fields of the whole line (after pid and comm).
    return (int(fields[11]) + int(fields[12])) / TICK


def client_database(title: str) -> str | None:
    """The database a PostgreSQL client backend serves, from its process title
    (``postgres: [cluster: ]user database host(port) state``); None for the server's own
    processes (the postmaster, checkpointer, WAL writer, autovacuum, …)."""
    words = title.replace("\0", " ").split()
    if words[:1] != ["postgres:"]:
        return None
    words = words[1:]
    if words and words[0].endswith(":"):  # the cluster's name (cluster_name), when set
        words = words[1:]
    if len(words) >= 3 and (words[2] == "[local]" or _CLIENT.fullmatch(words[2])):
        return words[1]
    return None


_CLIENT = re.compile(r".+\(\d+\)")


def _postgres_seconds(database: str | None = DATABASE) -> dict[int, float]:
    """Every PostgreSQL process's CPU seconds, except client backends of databases other than
    ``database`` (other work on the same server, such as a test suite's): the server's own
    processes are shared, and counted."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != POSTGRES:
                continue
            served = client_database((entry / "cmdline").read_text())
        except OSError:
            continue
        if database is not None and served not in (None, database):
            continue
        seconds = _process_seconds(int(entry.name))
        if seconds is not None:
            found[int(entry.name)] = seconds
    return found


def _machine_busy_seconds() -> float:
    first = Path("/proc/stat").read_text().splitlines()[0].split()
    values = [int(v) for v in first[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values[:8]) - idle) / TICK


@dataclass(frozen=True)
class CpuReading:
    named: dict[str, float]
    postgres: dict[int, float]
    bench: float
    machine: float

    @classmethod
    def now(cls, pids: Mapping[str, int]) -> CpuReading:
        named = {name: _process_seconds(pid) or 0.0 for name, pid in pids.items()}
        times = os.times()
        return cls(named, _postgres_seconds(), times.user + times.system, _machine_busy_seconds())


@dataclass(frozen=True)
class CpuUse:
    """CPU seconds spent during one window, by who spent them."""

    by: dict[str, float]
    machine: float

    @classmethod
    def between(cls, before: CpuReading, after: CpuReading) -> CpuUse:
        by = {name: after.named[name] - before.named.get(name, 0.0) for name in after.named}
        # A backend that started inside the window counts from zero.
        by[POSTGRES] = sum(
            seconds - before.postgres.get(pid, 0.0) for pid, seconds in after.postgres.items()
        )
        by[BENCH] = after.bench - before.bench
        return cls({k: max(0.0, v) for k, v in by.items()}, after.machine - before.machine)

    @property
    def attributed(self) -> float:
        return sum(self.by.values())

    def per_call_ms(self, calls: int) -> dict[str, object]:
        def ms(seconds: float) -> float:
            return round(1000 * seconds / calls, 3) if calls else 0.0

        return {
            "attributed": ms(self.attributed),
            "machine": ms(self.machine),
            "by": {name: ms(seconds) for name, seconds in sorted(self.by.items())},
        }
