"""The followers figure (round 4): 100 ``StreamJournal`` followers spread over two ledger replicas
(both on the bench schema) while eight writers append through the first, beside the same appends
without followers in the same round.

Each follower follows one writer's run (spread evenly) on its own channel from the first entry;
each replica's 50 followers run in a process of their own, as remote watchers would. The figure's
followers ask for batches (``BATCH`` entries a message at most, ADR 0033); followers of one entry
a message, the stream's default shape, run in the same round and are reported beside.
Every appended payload carries the writer's ``time.time()`` just before the call, and a follower
notes when each entry reaches it: the delivery latency is therefore commit-to-follower plus the
append call's own latency, the time a watcher waits to see what a writer did. Every follower
must see its run's entries exactly once and in order (checked, not assumed).
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import grpc

from bench import floors
from bench.figures import CALLERS, Clients, K, bench_run_request
from bench.load import Latencies, Throughput, median, ratio, run_concurrently
from bench.paired import in_turn
from forge.continuity.v1 import ledger_pb2, ledger_pb2_grpc
from shared.runtime.client import open_channel

FOLLOWERS = 100
REPLICAS = 2
READER_TOKEN = "dev-reader-token"  # noqa: S105 - local-only development credential
# Each ledger process holds half the followers on its pool threads, all under the one reader
# token (the figure is the fan-out of one process, whoever follows): the settings are raised for
# the bench processes only (the defaults are 8 followers of 32 threads, 4 per caller, and a
# stream ends after 900 s; the followers here live as long as their 3600 s deadline).
PROCESS_ENV = {
    "FORGE_MAX_JOURNAL_FOLLOWERS": "64",
    "FORGE_MAX_FOLLOWERS_PER_CALLER": "64",
    "FORGE_MAX_STREAM_SECONDS": "3600",
    "FORGE_SERVER_THREADS": "160",
}
DELIVERY_WAIT_SECONDS = 120.0
# The followers of the figure ask for batches (StreamJournalRequest.max_entries_per_message): a
# follower of a busy run then receives what each poll found in one message. Each round also runs
# followers that take one entry a message (the default shape), reported beside.
BATCH = 100


class _Writers:
    """Eight writers, each on its own run through the first ledger; each payload carries the
    writer's wall-clock time before the call."""

    def __init__(self, clients: Clients, prefix: str) -> None:
        self.runs = [f"{prefix}-{i}" for i in range(CALLERS)]
        self.stubs = [clients.ledger() for _ in range(CALLERS)]
        self.heads = [""] * CALLERS
        self._counter = itertools.count()
        for stub, run_id in zip(self.stubs, self.runs, strict=True):
            stub.CreateRun(bench_run_request(run_id))

    def append(self, index: int) -> None:
        payload = {"annotation": f"{time.time()!r}|n{next(self._counter)}"}
        entry = (
            self.stubs[index]
            .AppendJournalEntry(
                ledger_pb2.AppendJournalEntryRequest(
                    run_id=self.runs[index],
                    expected_head_hash=self.heads[index],
                    kind=K.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
                    payload_json=json.dumps(payload),
                )
            )
            .entry
        )
        self.heads[index] = entry.hash

    def callers(self) -> list[Callable[[int], None]]:
        def caller(index: int) -> Callable[[int], None]:
            return lambda _n: self.append(index)

        return [caller(i) for i in range(CALLERS)]


@dataclass
class _Follower:
    """One follower on its own channel: the sequences it received and each delivery's delay."""

    target: str
    run_id: str
    batch: int
    sequences: list[int] = field(default_factory=list)
    delays: list[float] = field(default_factory=list)
    error: str = ""
    arrived: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.channel = open_channel(self.target, READER_TOKEN)
        self.thread = threading.Thread(target=self._follow, daemon=True)
        self.thread.start()

    def _follow(self) -> None:
        stub = ledger_pb2_grpc.LedgerServiceStub(self.channel)
        request = ledger_pb2.StreamJournalRequest(
            run_id=self.run_id, from_sequence=1, follow=True, max_entries_per_message=self.batch
        )
        try:
            for response in stub.StreamJournal(request, timeout=3600):
                received = time.time()
                for entry in response.entries if self.batch else (response.entry,):
                    self.sequences.append(entry.sequence)
                    stamp = json.loads(entry.payload_json)["annotation"].split("|")[0]
                    if entry.sequence > 1:  # appended before the follower began: not timed
                        self.delays.append(received - float(stamp))
                self.arrived.set()
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.CANCELLED:
                self.error = f"{error.code().name}: {error.details()}"
                self.arrived.set()

    def close(self) -> None:
        self.channel.close()
        self.thread.join(timeout=30)


def _follow_in_process(
    assignments: list[tuple[str, str]], head: int, batch: int, pipe: Connection
) -> None:
    """A follower process: follow each (target, run), say "ready" once every follower has its
    run's first entry, then report once every follower has the entries up to ``head``."""
    followers = [_Follower(target, run_id, batch) for target, run_id in assignments]
    try:
        for follower in followers:
            if not follower.arrived.wait(DELIVERY_WAIT_SECONDS) or follower.error:
                pipe.send(f"a follower did not start: {follower.error or 'timeout'}")
                return
        pipe.send("ready")
        deadline = time.monotonic() + DELIVERY_WAIT_SECONDS * 2
        while any(len(f.sequences) < head and not f.error for f in followers):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        for follower in followers:
            follower.close()
    pipe.send(
        [
            (f"{f.run_id}@{f.target}", f.error, f.sequences == list(range(1, head + 1)), f.delays)
            for f in followers
        ]
    )


def _with_followers(clients: Clients, calls_each: int, prefix: str, batch: int) -> dict[str, Any]:
    """The appends with the followers open, each replica's followers in a process of their own
    (a watcher is elsewhere; in the bench process they would compete with the writers for its
    interpreter lock)."""
    writers = _Writers(clients, prefix)
    for index in range(CALLERS):
        writers.append(index)  # entry 1: every follower shows it is streaming before the window
    head = calls_each + 1
    targets = [clients.target("ledger")] + [
        clients.target(f"ledger-{n}") for n in range(2, REPLICAS + 1)
    ]
    spawn = multiprocessing.get_context("spawn")
    processes, pipes = [], []
    for replica, target in enumerate(targets):
        ours = [i for i in range(FOLLOWERS) if i % REPLICAS == replica]
        assignments = [(target, writers.runs[i % CALLERS]) for i in ours]
        receiver, sender = spawn.Pipe(duplex=False)
        process = spawn.Process(target=_follow_in_process, args=(assignments, head, batch, sender))
        process.start()
        processes.append(process)
        pipes.append(receiver)
    try:
        for pipe in pipes:
            said = pipe.recv() if pipe.poll(DELIVERY_WAIT_SECONDS) else "no answer"
            if said != "ready":
                raise RuntimeError(f"the followers did not start: {said}")
        watch = dict(clients.pids)
        for number, process in enumerate(processes, 1):
            assert process.pid is not None
            watch[f"followers-{number}"] = process.pid
        measured = run_concurrently(writers.callers(), calls_each, watch=watch)
        reports = []
        for pipe in pipes:
            if not pipe.poll(DELIVERY_WAIT_SECONDS * 3):
                raise RuntimeError("the followers never reported")
            reports += pipe.recv()
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    faults = [f"{name}: {error or 'gap or duplicate'}" for name, error, ok, _ in reports if not ok]
    delays = [delay for *_, follower_delays in reports for delay in follower_delays]
    return {
        "measured": measured,
        "faults": faults[:5],
        "faulty_followers": len(faults),
        "delivery": Latencies.of(delays),
    }


def _round(clients: Clients, calls_each: int, index: int) -> dict[str, Any]:
    """The appends alone, with followers that batch (the figure), and with followers that take
    one entry a message (the default shape, as a follower that does not ask receives), in that
    order in even rounds and the reverse in odd ones (bench.paired.in_turn)."""

    def alone() -> dict[str, Any]:
        writers = _Writers(clients, f"bench-alone-{index}")
        return {"measured": run_concurrently(writers.callers(), calls_each, watch=clients.pids)}

    def followed(prefix: str, batch: int) -> Callable[[], dict[str, Any]]:
        return lambda: _with_followers(clients, calls_each, f"{prefix}-{index}", batch)

    without, batched, single = in_turn(
        index, [alone, followed("bench-followed", BATCH), followed("bench-followed-single", 0)]
    )
    alone_measured: Throughput = without["measured"]
    shapes = {"": batched, "one_entry_a_message_": single}
    figure: dict[str, Any] = {"without_followers": alone_measured.as_dict()}
    for shape, followed_shape in shapes.items():
        measured: Throughput = followed_shape["measured"]
        figure[f"{shape}with_followers"] = measured.as_dict()
        figure[f"{shape}followers_append_ratio"] = ratio(
            measured.per_second, alone_measured.per_second
        )
        # CPU per append with the followers (their processes included) over without them
        figure[f"{shape}followers_append_cpu_ratio"] = ratio(
            measured.cpu_ms_per_call, alone_measured.cpu_ms_per_call
        )
        figure[f"{shape}delivery"] = followed_shape["delivery"].as_dict()
        figure[f"{shape}faulty_followers"] = followed_shape["faulty_followers"]
        figure[f"{shape}faults"] = followed_shape["faults"]
    return figure


def _median(values: list[float]) -> float:
    return round(median(values), 3)


def followers_figure(
    clients: Clients, calls_each: int, rounds: int | None = None
) -> dict[str, Any]:
    """The rounds, each running the appends without followers, with followers that batch and
    with followers of one entry a message; ratios (with / without) are medians."""
    count = floors.ROUNDS if rounds is None else rounds
    measured = [_round(clients, calls_each, index) for index in range(count)]
    figure: dict[str, Any] = {
        "followers": FOLLOWERS,
        "replicas": REPLICAS,
        "writers": CALLERS,
        "appends_per_writer": calls_each,
        "max_entries_per_message": BATCH,
    }
    for shape in ("", "one_entry_a_message_"):
        figure |= {
            f"{shape}followers_append_ratio": _median(
                [r[f"{shape}followers_append_ratio"] for r in measured]
            ),
            f"{shape}followers_append_cpu_ratio": _median(
                [r[f"{shape}followers_append_cpu_ratio"] for r in measured]
            ),
            f"{shape}followers_delivery_p50_ms": _median(
                [r[f"{shape}delivery"]["p50_ms"] for r in measured]
            ),
            f"{shape}followers_delivery_p99_ms": _median(
                [r[f"{shape}delivery"]["p99_ms"] for r in measured]
            ),
        }
    figure["faulty_followers"] = sum(
        r["faulty_followers"] + r["one_entry_a_message_faulty_followers"] for r in measured
    )
    figure["per_round"] = {
        key: [r[key] for r in measured]
        for key in ("followers_append_ratio", "followers_append_cpu_ratio")
    }
    figure["rounds"] = measured
    return figure
