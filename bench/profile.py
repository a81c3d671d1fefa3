"""`python -m bench.profile`: sample every service process with py-spy (all threads) while 8
callers admit pre-seeded held runs, and print where each process spends its samples.
`python -m bench.profile worker` samples them under the worker path instead (bench.worker_path:
8 workers stepping through admitted requests), `python -m bench.profile append` under figure 3's
load (8 writers appending to their own runs), `python -m bench.profile candidate` under repeated
candidate reads of one held run of CANDIDATE_ENTRIES entries (figure 2's shape),
`python -m bench.profile candidate-first` under first reads (CANDIDATE_READS held runs of that
length, each read once: nothing of them remembered by either end).

Each process is sampled only in the thread holding the GIL (py-spy's ``--gil``): a sample is
the process's Python at work, never a thread waiting on a socket, a lock or the database, which
without it counted as much as work does. What runs without the GIL (gRPC's core, libpq, the
kernel) is not in these samples; the bench's CPU figures count it.

Writes the collapsed stacks to bench/results/profile/<service>.txt (flame-graph input) and prints,
per service, its share of the samples and the functions with the most inclusive samples.
"""

from __future__ import annotations

import collections
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bench import figures, worker_path
from bench.load import Throughput, run_concurrently
from bench.seed import seed_long_held_run
from bench.stack import bench_schema, services
from forge.continuity.v1 import candidate_pb2

OUT = Path(__file__).resolve().parent / "results" / "profile"
ADMISSIONS_EACH = 6
WORKER_REQUESTS_EACH = 6
APPENDS_EACH = 400
CANDIDATE_ENTRIES = 20_000
CANDIDATE_READS = 5
TOP = 12


def _inclusive(collapsed: Path) -> tuple[int, collections.Counter[str]]:
    total, counts = 0, collections.Counter[str]()
    for line in collapsed.read_text().splitlines():
        stack, _, number = line.rpartition(" ")
        samples = int(number)
        total += samples
        for frame in set(stack.split(";")):
            counts[frame] += samples
    return total, counts


def _admission_load(clients: figures.Clients, _url: str) -> Callable[[], Throughput]:
    prepared = figures.prepared_admissions(clients, "profile", figures.CALLERS * ADMISSIONS_EACH)
    stubs = [clients.admissions() for _ in range(figures.CALLERS)]

    def caller(index: int) -> Callable[[int], None]:
        def admit(n: int) -> None:
            stubs[index].RequestInvalidReadContinuity(prepared[index * ADMISSIONS_EACH + n])

        return admit

    return lambda: run_concurrently([caller(i) for i in range(figures.CALLERS)], ADMISSIONS_EACH)


def _worker_load(clients: figures.Clients, _url: str) -> Callable[[], Throughput]:
    workers = worker_path.prepared_workers(clients, WORKER_REQUESTS_EACH, "profile")
    return lambda: worker_path.stepped(clients, workers)


def _append_load(clients: figures.Clients, _url: str) -> Callable[[], Throughput]:
    return lambda: figures.append_throughput(clients, APPENDS_EACH, "profile-append")


def _candidate_load(clients: figures.Clients, url: str) -> Callable[[], Throughput]:
    run_id = "profile-candidate"
    seed_long_held_run(clients.ledger(), url, figures.FIXTURE, run_id, CANDIDATE_ENTRIES)
    stub = clients.candidates(timeout=figures.CANDIDATE_TIMEOUT_SECONDS)
    request = candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_id)
    stub.GetInvalidReadContinuityCandidate(request)  # the first read: verification remembered

    def read(_n: int) -> None:
        stub.GetInvalidReadContinuityCandidate(request)

    return lambda: run_concurrently([read], CANDIDATE_READS)


def _candidate_first_load(clients: figures.Clients, url: str) -> Callable[[], Throughput]:
    ledger = clients.ledger()
    run_ids = [f"profile-candidate-first-{n}" for n in range(CANDIDATE_READS)]
    for run_id in run_ids:
        seed_long_held_run(ledger, url, figures.FIXTURE, run_id, CANDIDATE_ENTRIES)
    stub = clients.candidates(timeout=figures.CANDIDATE_TIMEOUT_SECONDS)

    def read(n: int) -> None:
        request = candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_ids[n])
        stub.GetInvalidReadContinuityCandidate(request)

    return lambda: run_concurrently([read], CANDIDATE_READS)


LOADS = {
    "worker": _worker_load,
    "append": _append_load,
    "candidate": _candidate_load,
    "candidate-first": _candidate_first_load,
}


def main() -> int:
    spy = shutil.which("py-spy")
    if spy is None:
        print("py-spy is not installed (pip install py-spy)", file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    with bench_schema() as url, services(url) as running:
        clients = figures.Clients(running)
        clients.set_policy()
        load = LOADS.get(" ".join(sys.argv[1:]), _admission_load)(clients, url)
        samplers = {
            name: subprocess.Popen(
                [
                    spy,
                    "record",
                    "--pid",
                    str(pid),
                    "--format",
                    "raw",
                    "--rate",
                    "200",
                    "--output",
                    str(OUT / f"{name}.txt"),
                    "--nonblocking",
                    "--gil",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for name, pid in running.pids.items()
        }
        result = load()
        for sampler in samplers.values():
            sampler.send_signal(2)
        for sampler in samplers.values():
            sampler.wait(timeout=30)
    latency = result.latencies.p50_ms
    print(f"{result.calls} calls, {result.per_second:.2f}/s, p50 {latency:.0f} ms")
    for name in samplers:
        collapsed = OUT / f"{name}.txt"
        if not collapsed.exists():
            continue
        total, counts = _inclusive(collapsed)
        print(f"\n== {name}: {total} samples")
        project = [(f, c) for f, c in counts.most_common() if "services/" in f or "shared/" in f]
        for frame, count in project[:TOP]:
            print(f"  {100 * count / max(total, 1):5.1f}%  {frame}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
