"""The five figures of ``make bench``, each with the baseline it is compared against."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
from sqlalchemy import create_engine

from bench.baseline import METHOD
from bench.load import (
    Latencies,
    Throughput,
    alternated_samples,
    median,
    ratio,
    run_concurrently,
    timed,
)
from bench.seed import seed_long_held_run
from bench.stack import Baseline, Services, memory_kib
from forge.continuity.v1 import (
    admission_pb2,
    admission_pb2_grpc,
    candidate_pb2,
    candidate_pb2_grpc,
    common_pb2,
    execution_pb2_grpc,
    ledger_pb2,
    ledger_pb2_grpc,
    policy_pb2,
    policy_pb2_grpc,
    reconstruction_pb2,
    reconstruction_pb2_grpc,
)
from services.demo.seed import HeldRunFixture, load_fixture, seed_held_run
from services.ledger.repository.journal_reads import iter_journal
from services.reconstruction.domain import reconstruct_invalid_read
from services.runner import DEV_SERVICE_TOKENS
from shared.continuity.journal_chain import verify_chain
from shared.runtime.client import open_channel

CALLERS = 8
# The bench's own deadline for one candidate read (the services keep their downstream deadlines).
CANDIDATE_TIMEOUT_SECONDS = 300.0
# The local development credentials (services.runner.DEV_PRINCIPALS) the bench services trust.
WRITER_TOKEN = "dev-writer-token"  # noqa: S105 - local-only development credential
FIXTURE: HeldRunFixture = load_fixture("v1_basic")
K = common_pb2.JournalEntryKind


class Clients:
    """Authenticated stubs of the running services (one channel per caller where it matters)."""

    def __init__(self, services: Services) -> None:
        self._targets = services.targets
        # The service processes whose CPU the throughput figures record.
        self.pids = dict(services.pids)

    def target(self, service: str) -> str:
        return self._targets[service]

    def ledger(self, token: str = WRITER_TOKEN) -> ledger_pb2_grpc.LedgerServiceStub:
        return ledger_pb2_grpc.LedgerServiceStub(open_channel(self._targets["ledger"], token))

    def execution(self, token: str) -> execution_pb2_grpc.ExecutionServiceStub:
        channel = open_channel(self._targets["ledger"], token)
        return execution_pb2_grpc.ExecutionServiceStub(channel)

    def candidates(self, timeout: float = 30.0) -> candidate_pb2_grpc.CandidateServiceStub:
        channel = open_channel(
            self._targets["candidate"], "dev-operator-token", default_timeout=timeout
        )
        return candidate_pb2_grpc.CandidateServiceStub(channel)

    def admissions(self) -> admission_pb2_grpc.AdmissionServiceStub:
        channel = open_channel(self._targets["admission"], "dev-operator-token")
        return admission_pb2_grpc.AdmissionServiceStub(channel)

    def reconstruction(self) -> reconstruction_pb2_grpc.ReconstructionServiceStub:
        # Reconstruction serves only the candidate service's identity (one identity per service).
        token = DEV_SERVICE_TOKENS["candidate"]
        channel = open_channel(self._targets["reconstruction"], token)
        return reconstruction_pb2_grpc.ReconstructionServiceStub(channel)

    def set_policy(self) -> None:
        policy = policy_pb2_grpc.PolicyServiceStub(
            open_channel(self._targets["ledger"], "dev-admin-token")
        )
        current = policy.GetPolicy(policy_pb2.GetPolicyRequest()).policy
        policy.PutPolicy(
            policy_pb2.PutPolicyRequest(
                expected_revision=current.revision,
                settings=common_pb2.PolicySettings(
                    enabled=True, window_seconds=3600, pending_ticket_limit=1_000_000
                ),
            )
        )


def baseline_floor(baseline: Baseline, calls_each: int) -> Throughput:
    """8 concurrent callers of the bare server: one gRPC call + one 3-row transaction each."""
    channels = [grpc.insecure_channel(baseline.target) for _ in range(CALLERS)]
    methods = [channel.unary_unary(METHOD, None, None) for channel in channels]
    for method in methods:
        method(b"warm-up")

    def caller(index: int) -> Callable[[int], None]:
        def insert(_n: int) -> None:
            methods[index](b"x")

        return insert

    try:
        return run_concurrently(
            [caller(i) for i in range(CALLERS)], calls_each, watch=baseline.pids
        )
    finally:
        for channel in channels:
            channel.close()


def submission(
    candidate: candidate_pb2.InvalidReadContinuityCandidate, request_id: str
) -> admission_pb2.RequestInvalidReadContinuityRequest:
    return admission_pb2.RequestInvalidReadContinuityRequest(
        run_id=candidate.run_id,
        request_id=request_id,
        digests=candidate.digests,
        version=1,
        valid_for_seconds=1800,
        acknowledge_no_new_grant=True,
        acknowledge_original_consumption=True,
        acknowledge_renewed_same_attempt_lease=True,
    )


def prepared_admissions(
    clients: Clients, prefix: str, count: int
) -> list[admission_pb2.RequestInvalidReadContinuityRequest]:
    """``count`` held runs seeded by RPC, each with the submission its candidate supports, in
    that order (seeded by CALLERS threads: a figure of 800 admissions seeds 800 runs first)."""
    ledger, candidates = clients.ledger(), clients.candidates()

    def prepare(n: int) -> admission_pb2.RequestInvalidReadContinuityRequest:
        run_id = f"{prefix}-{n}"
        seed_held_run(ledger, FIXTURE, run_id)
        candidate = candidates.GetInvalidReadContinuityCandidate(
            candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_id)
        ).candidate
        if not candidate.eligible:
            raise RuntimeError(f"seeded run {run_id} is not eligible: {candidate.holds}")
        return submission(candidate, f"req-{n}")

    with ThreadPoolExecutor(max_workers=CALLERS) as pool:
        return list(pool.map(prepare, range(count)))


def admission_throughput(
    clients: Clients, calls_each: int, prefix: str = "bench-admit"
) -> Throughput:
    """Figure 1: 8 concurrent callers, each admitting its own pre-seeded held runs."""
    return admitted(clients, admissions_to_time(clients, calls_each, prefix), calls_each)


def admissions_to_time(
    clients: Clients, calls_each: int, prefix: str
) -> list[admission_pb2.RequestInvalidReadContinuityRequest]:
    """What ``admitted`` times ``calls_each`` admissions a caller with (one more each to warm
    up), seeded before a round's first timed window."""
    return prepared_admissions(clients, prefix, CALLERS * (calls_each + 1))


def admitted(
    clients: Clients,
    prepared: list[admission_pb2.RequestInvalidReadContinuityRequest],
    calls_each: int,
) -> Throughput:
    """The timed admissions of ``prepared`` (``admissions_to_time``), 8 callers."""
    stubs = [clients.admissions() for _ in range(CALLERS)]
    # One warm-up admission per caller (connections, first-call paths), not counted.
    for index, stub in enumerate(stubs):
        stub.RequestInvalidReadContinuity(prepared[index * (calls_each + 1)])

    def caller(index: int) -> Callable[[int], None]:
        def admit(n: int) -> None:
            response = stubs[index].RequestInvalidReadContinuity(
                prepared[index * (calls_each + 1) + 1 + n]
            )
            if not response.created:
                raise RuntimeError("an admission was not created")

        return admit

    return run_concurrently([caller(i) for i in range(CALLERS)], calls_each, watch=clients.pids)


def bench_run_request(run_id: str) -> ledger_pb2.CreateRunRequest:
    """A plain run for the append figures to write to (no held turn, no continuity)."""
    return ledger_pb2.CreateRunRequest(
        run_id=run_id,
        task_id=f"{run_id}-task",
        attempt_id=f"{run_id}-attempt-1",
        source_revision="git:4f1c2a9",
        configuration_digest="sha256:" + "0" * 64,
        provider_timeout_seconds=900,
        command_limit=22,
        time_budget_protocol="forge.time-budget.v1",
        source_profile="bench",
    )


def append_throughput(
    clients: Clients, calls_each: int, prefix: str = "bench-append"
) -> Throughput:
    """Figure 3: 8 writers, each appending to its own run (8 runs)."""
    stubs = [clients.ledger() for _ in range(CALLERS)]
    heads = [""] * CALLERS
    counter = itertools.count()
    for index, stub in enumerate(stubs):
        stub.CreateRun(bench_run_request(f"{prefix}-{index}"))

    def caller(index: int) -> Callable[[int], None]:
        def append(_n: int) -> None:
            entry = (
                stubs[index]
                .AppendJournalEntry(
                    ledger_pb2.AppendJournalEntryRequest(
                        run_id=f"{prefix}-{index}",
                        expected_head_hash=heads[index],
                        kind=K.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
                        payload_json=json.dumps({"annotation": f"n{next(counter)}"}),
                    )
                )
                .entry
            )
            heads[index] = entry.hash

        return append

    return run_concurrently([caller(i) for i in range(CALLERS)], calls_each, watch=clients.pids)


def candidate_latency(
    clients: Clients, database_url: str, lengths: tuple[int, ...], repeats: Mapping[int, int]
) -> list[dict[str, Any]]:
    """Figure 2: the candidate of a held run whose journal has each length, beside the in-process
    verification of the same stored entries (the chain's canonical envelopes hashed with
    hashlib, shared.continuity.journal_chain.verify_chain) — the cost of verifying the chain at
    all."""
    ledger, candidates = clients.ledger(), clients.candidates(timeout=CANDIDATE_TIMEOUT_SECONDS)
    engine = create_engine(database_url)
    rows = []
    try:
        for length in lengths:
            run_id = f"bench-journal-{length}"
            seed_long_held_run(ledger, database_url, FIXTURE, run_id, length)
            with engine.connect() as connection:
                stored = list(iter_journal(connection, run_id, batch=5_000))
            request = candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_id)
            # The yardstick once just before the first read, which it is compared with.
            began = time.perf_counter()
            verify_chain(stored)
            hashed_before_first_read = time.perf_counter() - began
            # A first read the services cannot finish within their downstream deadline is a
            # result too: recorded, then tried once more (the ledger finishes the verification
            # it started, so the second read finds the rows remembered).
            failed: list[dict[str, Any]] = []
            first = None
            for _attempt in range(2):
                began = time.perf_counter()
                try:
                    first = candidates.GetInvalidReadContinuityCandidate(request).candidate
                    break
                except grpc.RpcError as error:
                    code = str(error.code())  # type: ignore[attr-defined]
                    failed.append({"code": code, "after_ms": (time.perf_counter() - began) * 1000})
            if first is None:
                rows.append({"entries": len(stored), "failed_first_reads": failed})
                continue
            first_read_ms = (time.perf_counter() - began) * 1000
            # Then each repeated read beside one hashing run, in turn.
            reads, hashed = alternated_samples(
                lambda: candidates.GetInvalidReadContinuityCandidate(request),  # noqa: B023
                lambda: verify_chain(stored),  # noqa: B023
                repeats[length],
            )
            read, hashing = Latencies.of(reads), Latencies.of([hashed_before_first_read, *hashed])
            paired = [ratio(r, h) for r, h in zip(reads, hashed, strict=True)]
            rows.append(
                {
                    "entries": len(stored),
                    "eligible": first.eligible,
                    # The first read of this journal (nothing of it remembered by any service),
                    # then the repeated reads the p50 / p99 below describe.
                    "first_read_ms": round(first_read_ms, 3),
                    "failed_first_reads": failed,
                    "first_read_ratio": ratio(first_read_ms, hashing.p50_ms),
                    "candidate": read.as_dict(),
                    "hashing_baseline": hashing.as_dict(),
                    "ratio_p50": ratio(read.p50_ms, hashing.p50_ms),
                    # each repeated read over the hashing run beside it (the figure since
                    # round 5: the median of these, with their spread)
                    "paired_ratios": paired,
                }
            )
    finally:
        engine.dispose()
    return rows


def reconstruction_latency(clients: Clients, repeats: int) -> dict[str, Any]:
    """Figure 4: one typical held run's reconstruction through the service, cold (inputs the
    service has not seen: a distinct consumption time each call) and warm (the same inputs again),
    beside the in-process domain function (fresh inputs each call)."""
    stub = clients.reconstruction()
    consumed = itertools.count()

    def request(consumed_at: str) -> reconstruction_pb2.ReconstructInvalidReadRequest:
        return reconstruction_pb2.ReconstructInvalidReadRequest(
            checkpoint=FIXTURE.checkpoint,
            raw_response=FIXTURE.raw_response,
            version=reconstruction_pb2.RECONSTRUCTION_VERSION_V1,
            consumed_at=consumed_at,
        )

    def fresh_time() -> str:
        return f"2026-01-01T00:{next(consumed) % 60:02d}:{time.time_ns() % 60:02d}Z"

    began = time.perf_counter()
    stub.ReconstructInvalidRead(request(FIXTURE.consumed_at))
    first_call_ms = (time.perf_counter() - began) * 1000
    cold = timed(lambda: stub.ReconstructInvalidRead(request(fresh_time())), repeats)
    warm = timed(lambda: stub.ReconstructInvalidRead(request(FIXTURE.consumed_at)), repeats)
    in_process = timed(
        lambda: reconstruct_invalid_read(FIXTURE.checkpoint, FIXTURE.raw_response, 1, fresh_time()),
        repeats,
    )
    return {
        "first_call_ms": round(first_call_ms, 3),
        "cold": cold.as_dict(),
        "warm": warm.as_dict(),
        "in_process_baseline": in_process.as_dict(),
        "cold_ratio_p50": ratio(cold.p50_ms, in_process.p50_ms),
        "warm_ratio_p50": ratio(warm.p50_ms, in_process.p50_ms),
    }


def memory_growth(
    clients: Clients, services: Services, small: int, large: int, admission_every: int
) -> dict[str, Any]:
    """Figure 5: peak RSS (VmHWM) of each service after ``small`` and after ``large`` operations.
    An operation is one journal append (8 writers) or one admission of a held run seeded for it;
    every ``admission_every``-th operation is an admission."""
    stubs = [clients.ledger() for _ in range(CALLERS)]
    admissions = [clients.admissions() for _ in range(CALLERS)]
    candidates = [clients.candidates() for _ in range(CALLERS)]
    done = itertools.count(1)
    lock = threading.Lock()
    snapshots: dict[int, dict[str, dict[str, int]]] = {}
    admitted = itertools.count(1)
    appended = itertools.count(1)
    counts = {"admissions": 0, "appends": 0}
    heads = [""] * CALLERS
    for index, stub in enumerate(stubs):
        seed_held_run(stub, FIXTURE, f"bench-rss-append-{index}", edit=lambda rows: rows[:1])
        heads[index] = stub.ReadJournal(
            ledger_pb2.ReadJournalRequest(run_id=f"bench-rss-append-{index}", page_size=1)
        ).head.hash

    def snapshot(at: int) -> None:
        snapshots[at] = {name: memory_kib(pid) for name, pid in services.pids.items()}

    def operation(index: int) -> None:
        number = next(done)
        if number % admission_every == 0:
            run_id = f"bench-rss-{index}-{number}"
            seed_held_run(stubs[index], FIXTURE, run_id)
            candidate = (
                candidates[index]
                .GetInvalidReadContinuityCandidate(
                    candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_id)
                )
                .candidate
            )
            admissions[index].RequestInvalidReadContinuity(submission(candidate, "req-1"))
            counts["admissions"] = next(admitted)
        else:
            heads[index] = (
                stubs[index]
                .AppendJournalEntry(
                    ledger_pb2.AppendJournalEntryRequest(
                        run_id=f"bench-rss-append-{index}",
                        expected_head_hash=heads[index],
                        kind=K.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
                        payload_json=json.dumps({"annotation": f"op {number}"}),
                    )
                )
                .entry.hash
            )
            counts["appends"] = next(appended)
        if number in (small, large):
            with lock:
                snapshot(number)

    began = time.perf_counter()
    run_concurrently(
        [lambda _n, i=index: operation(i) for index in range(CALLERS)],  # type: ignore[misc]
        -(-large // CALLERS),
    )
    seconds = time.perf_counter() - began
    after_small, after_large = snapshots.get(small, {}), snapshots.get(large, {})
    per_service: dict[str, dict[str, Any]] = {
        name: {
            "after_small_kib": after_small[name],
            "after_large_kib": after_large[name],
            "peak_ratio": ratio(after_large[name]["VmHWM"], after_small[name]["VmHWM"]),
        }
        for name in services.pids
    }
    return {
        "operations_small": small,
        "operations_large": large,
        "admission_every": admission_every,
        "operations_done": counts,
        "seconds": round(seconds, 1),
        "services": per_service,
        "worst_peak_ratio": max(float(s["peak_ratio"]) for s in per_service.values()),
    }


__all__ = ["Clients", "Latencies", "median"]
