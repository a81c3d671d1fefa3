"""Scenarios 5-7 of the replica suite: a claim and its lease fenced across replicas, a journal
follower on one replica of appends made through the other, and SIGKILL of one replica in the
middle of a flood while the other serves (tests/scale/harness.py)."""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import grpc

from forge.continuity.v1 import (
    admission_pb2,
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    ledger_pb2,
    ledger_pb2_grpc,
)
from shared.continuity.canonical import digest_of
from tests.admission.conftest import submission
from tests.ledger.admission_support import claim_request
from tests.ledger.conftest import run_request
from tests.scale.harness import UNKNOWN_OUTCOMES, Replicas, outcome, report, scale, tally
from tests.support import whole_journal

INTENT = common_pb2.JOURNAL_ENTRY_KIND_TOOL_INTENT
SETTLEMENT = common_pb2.JOURNAL_ENTRY_KIND_MIGRATION_SETTLEMENT
CALL_SECONDS = 60
Worker = execution_pb2_grpc.ExecutionServiceStub
Request = admission_pb2.RequestInvalidReadContinuityRequest


# --- 5. a claim on ledger 2 of a ticket admitted through ledger 1; fencing across replicas -------

FENCING_ROUNDS = scale(fast=2, full=20)


def _writes(exr: str, generation: int, tag: str) -> list[Callable[[Worker], object]]:
    """Every write a worker makes under a lease (RecordCommand, Complete, Fail)."""
    return [
        lambda stub: stub.RecordCommand(
            execution_pb2.RecordCommandRequest(
                execution_request_id=exr,
                lease_generation=generation,
                command_id=f"cmd-{tag}",
                command_digest=digest_of(tag),
            ),
            timeout=CALL_SECONDS,
        ),
        lambda stub: stub.CompleteExecutionRequest(
            execution_pb2.CompleteExecutionRequestRequest(
                execution_request_id=exr, lease_generation=generation
            ),
            timeout=CALL_SECONDS,
        ),
        lambda stub: stub.FailExecutionRequest(
            execution_pb2.FailExecutionRequestRequest(
                execution_request_id=exr, lease_generation=generation, reason=tag
            ),
            timeout=CALL_SECONDS,
        ),
    ]


def _refusals(stub: Worker, writes: list[Callable[[Worker], object]]) -> list[str]:
    outcomes = []
    for write in writes:
        try:
            write(stub)
            outcomes.append("OK")
        except grpc.RpcError as error:
            outcomes.append(outcome(error))
    return outcomes


def claim_and_fencing_across_replicas(replicas: Replicas, *, rounds: int = FENCING_ROUNDS) -> None:
    """A ticket admitted through lane 1 is claimed on ledger 2; the rival's claim and every
    write under a stale generation or by a non-owner is refused on both replicas and writes
    nothing; the owner's writes land on either replica, a repeat charges once."""
    replicas.set_policy()
    owner = [replicas.execution(replica) for replica in (0, 1)]
    rival = [replicas.execution(replica, "worker2-token") for replica in (0, 1)]
    refused: list[str] = []
    for round_number in range(rounds):
        run_id = f"{replicas.variant}-fence-{round_number}"
        replicas.seed(run_id, replica=0)
        lane = replicas.lanes[0]
        ticket = (
            lane.admissions()
            .RequestInvalidReadContinuity(
                submission(lane.candidate_of(run_id), request_id=f"req-{run_id}"),
                timeout=CALL_SECONDS,
            )
            .ticket
        )
        exr = ticket.execution_request.execution_request_id
        claim = claim_request(replicas.clients(1), exr)
        generation = (
            owner[1].ClaimExecutionRequest(claim, timeout=CALL_SECONDS).execution_request.lease
        ).generation
        counts = replicas.counts()
        outcomes = []
        try:
            rival[0].ClaimExecutionRequest(claim, timeout=CALL_SECONDS)
            outcomes.append("OK")
        except grpc.RpcError as error:
            outcomes.append(outcome(error))
        stale = [generation - 1, generation + 1]
        for replica in (0, 1):
            for old in stale:
                stale_outcomes = _refusals(owner[replica], _writes(exr, old, f"stale-{old}"))
                assert set(stale_outcomes) == {"FAILED_PRECONDITION:LEASE_GENERATION_STALE"}
                outcomes += stale_outcomes
            foreign = _refusals(rival[replica], _writes(exr, generation, "rival"))
            assert set(foreign) == {"PERMISSION_DENIED:NOT_LEASE_OWNER"}, foreign
            outcomes += foreign
        assert "OK" not in outcomes, outcomes
        assert not [o for o in outcomes if o.split(":")[0] in UNKNOWN_OUTCOMES], outcomes
        assert replicas.counts() == counts, round_number
        refused += outcomes
        # The owner's current generation holds on either replica; the repeat charges nothing.
        record = execution_pb2.RecordCommandRequest(
            execution_request_id=exr,
            lease_generation=generation,
            command_id="cmd-owner",
            command_digest=digest_of("owner"),
        )
        assert owner[0].RecordCommand(record, timeout=CALL_SECONDS).charged
        assert not owner[1].RecordCommand(record, timeout=CALL_SECONDS).charged
        owner[1].CompleteExecutionRequest(
            execution_pb2.CompleteExecutionRequestRequest(
                execution_request_id=exr, lease_generation=generation
            ),
            timeout=CALL_SECONDS,
        )
    report(
        "replicas_claim_and_fencing",
        variant=replicas.variant,
        rounds=rounds,
        refused_writes=len(refused),
        accepted=0,
        refusals=tally(refused),
    )


# --- 6. a journal follower on ledger 2 of appends made through ledger 1 -------------------------

FOLLOWED_APPENDS = scale(fast=20, full=500)


def _append(
    stub: ledger_pb2_grpc.LedgerServiceStub, run_id: str, head: str, call_id: str
) -> common_pb2.JournalEntry:
    request = ledger_pb2.AppendJournalEntryRequest(
        run_id=run_id,
        expected_head_hash=head,
        kind=INTENT,
        payload_json=json.dumps({"call_id": call_id}),
    )
    return stub.AppendJournalEntry(request, timeout=CALL_SECONDS).entry


def follower_across_replicas(replicas: Replicas) -> None:
    """Every entry appended through ledger 1 reaches a StreamJournal follower on ledger 2 once,
    in sequence, with its payload; the delay from acknowledgement to delivery is reported."""
    run_id = f"{replicas.variant}-followed"
    writer = replicas.ledger(0)
    writer.CreateRun(run_request(run_id), timeout=CALL_SECONDS)
    head = writer.GetRun(ledger_pb2.GetRunRequest(run_id=run_id), timeout=CALL_SECONDS).head
    first = head.sequence + 1
    last = head.sequence + FOLLOWED_APPENDS
    stream = replicas.ledger(1, "reader-token").StreamJournal(
        ledger_pb2.StreamJournalRequest(run_id=run_id, from_sequence=first, follow=True),
        timeout=CALL_SECONDS + FOLLOWED_APPENDS,
    )
    delivered: list[tuple[int, str, float]] = []

    def follow() -> None:
        for response in stream:
            payload = json.loads(response.entry.payload_json)
            delivered.append((response.entry.sequence, payload["call_id"], time.monotonic()))
            if response.entry.sequence >= last:
                # A traced channel (OpenTelemetry's client interceptor, when spans are exported)
                # hands back a generator over the call, which closing ends, not the call itself.
                if isinstance(stream, grpc.Call):
                    stream.cancel()
                else:
                    stream.close()
                return

    follower = threading.Thread(target=follow)
    follower.start()
    acknowledged: dict[str, float] = {}
    head_hash = head.hash
    for index in range(FOLLOWED_APPENDS):
        call_id = f"call-{index}"
        head_hash = _append(writer, run_id, head_hash, call_id).hash
        acknowledged[call_id] = time.monotonic()
    follower.join(timeout=CALL_SECONDS)
    assert not follower.is_alive(), f"the follower stopped at {len(delivered)} entries"
    assert [sequence for sequence, _, _ in delivered] == list(range(first, last + 1))
    assert [call for _, call, _ in delivered] == list(acknowledged)
    delays = sorted(max(0.0, at - acknowledged[call]) * 1000 for _, call, at in delivered)
    report(
        "replicas_journal_follower",
        variant=replicas.variant,
        appends=FOLLOWED_APPENDS,
        delivered=len(delivered),
        gaps=0,
        duplicates=0,
        delivery_ms_p50=round(statistics.median(delays), 1),
        delivery_ms_p95=round(delays[int(len(delays) * 0.95) - 1], 1),
        delivery_ms_max=round(delays[-1], 1),
    )


# --- 7. SIGKILL of ledger 1 in the middle of a flood while ledger 2 serves ----------------------

KILLS = scale(fast=1, full=5)
ADMISSIONS_PER_LANE = scale(fast=4, full=10)


@dataclass
class Flood:
    """What the flood acknowledged, and what the kill left unknown."""

    appended: dict[str, list[str]] = field(default_factory=dict)
    unknown_appends: list[ledger_pb2.AppendJournalEntryRequest] = field(default_factory=list)
    admitted: dict[str, bytes] = field(default_factory=dict)
    unknown_admissions: list[str] = field(default_factory=list)
    survivor_failures: list[str] = field(default_factory=list)
    settled: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, key: str) -> None:
        self.settled[key] = self.settled.get(key, 0) + 1


def _appender(
    replicas: Replicas, replica: int, run_id: str, flood: Flood, stop: threading.Event
) -> None:
    """Appends through ledger ``replica`` until stopped; a failure on ledger 1 is an unknown
    outcome (the kill), on ledger 2 a failure of the survivor."""
    stub = replicas.ledger(replica)
    head = stub.GetRun(ledger_pb2.GetRunRequest(run_id=run_id), timeout=CALL_SECONDS).head.hash
    while not stop.is_set():
        call_id = f"{run_id}-call-{len(flood.appended[run_id])}"
        request = ledger_pb2.AppendJournalEntryRequest(
            run_id=run_id,
            expected_head_hash=head,
            kind=INTENT,
            payload_json=json.dumps({"call_id": call_id}),
        )
        try:
            head = stub.AppendJournalEntry(request, timeout=10).entry.hash
        except grpc.RpcError as error:
            with flood.lock:
                if replica == 0:
                    flood.unknown_appends.append(request)
                else:
                    flood.survivor_failures.append(outcome(error))
            return
        flood.appended[run_id].append(call_id)


def _admitter(
    replicas: Replicas,
    replica: int,
    requests: dict[str, Request],
    flood: Flood,
    cut: Callable[[], None] | None = None,
    cut_at: int = 0,
) -> None:
    """Admits ``requests`` one after another through lane ``replica``. On lane 1, ``cut`` (the
    SIGKILL) comes right after admission ``cut_at`` was sent: that one is in flight, the ones
    after it find ledger 1 gone; each is an unknown outcome."""
    stub = replicas.lanes[replica].admissions()
    for index, (run_id, request) in enumerate(requests.items()):
        try:
            sent = stub.RequestInvalidReadContinuity.future(request, timeout=10)
            if cut is not None and index == cut_at:
                cut()
            response = sent.result()
        except grpc.RpcError as error:
            with flood.lock:
                if replica == 0:
                    flood.unknown_admissions.append(run_id)
                else:
                    flood.survivor_failures.append(outcome(error))
            continue
        flood.admitted[run_id] = response.ticket.SerializeToString()


def _settle(replicas: Replicas, flood: Flood, requests: dict[str, Request]) -> None:
    """Every unknown outcome retried with the same id, through ledger 2 and lane 2."""
    writer = replicas.ledger(1)
    for request in flood.unknown_appends:
        try:
            writer.AppendJournalEntry(request, timeout=CALL_SECONDS)
            flood.count("append_retry_appended")
        except grpc.RpcError as error:
            # The expected head moved: only this run's one appender moves it, so the cut append
            # had committed.
            assert error.code() == grpc.StatusCode.ABORTED, outcome(error)  # type: ignore[attr-defined]
            flood.count("append_retry_found_committed")
        flood.appended[request.run_id].append(json.loads(request.payload_json)["call_id"])
    flood.unknown_appends.clear()
    stub = replicas.lanes[1].admissions()
    for run_id in flood.unknown_admissions:
        response = stub.RequestInvalidReadContinuity(requests[run_id], timeout=CALL_SECONDS)
        flood.count("admission_retry_" + ("created" if response.created else "replayed"))
        flood.admitted[run_id] = response.ticket.SerializeToString()
    flood.unknown_admissions.clear()


def _verify(replicas: Replicas, flood: Flood, runs: list[str]) -> None:
    for replica in (0, 1):
        reader = replicas.ledger(replica, "reader-token")
        for run_id in runs:
            verified = reader.VerifyJournal(
                ledger_pb2.VerifyJournalRequest(run_id=run_id), timeout=CALL_SECONDS
            )
            assert verified.valid, (replica, run_id)
            entries = whole_journal(reader, run_id, timeout=CALL_SECONDS)
            calls = [json.loads(e.payload_json)["call_id"] for e in entries if e.kind == INTENT]
            if run_id in flood.appended:
                assert calls == flood.appended[run_id], run_id  # none lost, none duplicated
            else:
                assert sum(e.kind == SETTLEMENT for e in entries) == 1, run_id
                read_back = reader.GetAdmission(
                    ledger_pb2.GetAdmissionRequest(run_id=run_id, request_id=f"req-{run_id}"),
                    timeout=CALL_SECONDS,
                ).ticket
                assert read_back.SerializeToString() == flood.admitted[run_id], run_id


def _kill(replicas: Replicas, after: float, killed: threading.Event) -> None:
    time.sleep(after)
    replicas.ledgers[0].kill()
    killed.set()


def sigkill_during_flood(replicas: Replicas, *, kills: int = KILLS) -> None:
    """SIGKILL of ledger 1 while both lanes admit and both replicas append: the survivor never
    fails, every unknown outcome settles by a same-id retry on it, and afterwards every chain
    verifies on both replicas with nothing lost and nothing duplicated."""
    replicas.set_policy(replica=1)
    rng = random.Random(20261203)
    flood = Flood()
    runs: list[str] = []
    before = replicas.counts()
    started = time.monotonic()
    for kill in range(kills):
        appending = [f"{replicas.variant}-append-{kill}-{replica}" for replica in (0, 1)]
        for run_id in appending:
            replicas.ledger(1).CreateRun(run_request(run_id), timeout=CALL_SECONDS)
            flood.appended[run_id] = []
        admitting = [f"{replicas.variant}-kill-{kill}-{n}" for n in range(2 * ADMISSIONS_PER_LANE)]
        for run_id in admitting:
            replicas.seed(run_id, replica=1)
        lane_requests: list[dict[str, Request]] = [{}, {}]
        for index, run_id in enumerate(admitting):
            candidate = replicas.lanes[1].candidate_of(run_id)
            lane_requests[index % 2][run_id] = submission(candidate, request_id=f"req-{run_id}")
        requests = {**lane_requests[0], **lane_requests[1]}
        runs += appending + admitting
        stop, killed = threading.Event(), threading.Event()
        # Somewhere inside the admission just sent.
        cut = partial(_kill, replicas, rng.uniform(0.0, 0.03), killed)

        cut_at = rng.randrange(1, ADMISSIONS_PER_LANE - 1)
        threads = [
            threading.Thread(target=_appender, args=(replicas, replica, run_id, flood, stop))
            for replica, run_id in enumerate(appending)
        ] + [
            threading.Thread(
                target=_admitter, args=(replicas, 0, lane_requests[0], flood, cut, cut_at)
            ),
            threading.Thread(target=_admitter, args=(replicas, 1, lane_requests[1], flood)),
        ]
        for thread in threads:
            thread.start()
        assert killed.wait(timeout=CALL_SECONDS)
        time.sleep(0.5)  # ledger 2 keeps serving the appends while ledger 1 is gone
        stop.set()
        for thread in threads:
            thread.join(timeout=CALL_SECONDS)
            assert not thread.is_alive()
        assert flood.survivor_failures == [], tally(flood.survivor_failures)
        _settle(replicas, flood, requests)
        replicas.restart(0)
        _verify(replicas, flood, runs)
    after = replicas.counts()
    assert any(key.startswith("admission_retry_") for key in flood.settled), (
        "no admission was cut by the kill: the scenario proved nothing"
    )
    assert after["admission_tickets"] - before["admission_tickets"] == len(flood.admitted)
    assert after["execution_requests"] - before["execution_requests"] == len(flood.admitted)
    report(
        "replicas_sigkill_during_flood",
        variant=replicas.variant,
        kills=kills,
        appends_acknowledged=sum(len(calls) for calls in flood.appended.values()),
        admissions=len(flood.admitted),
        settled_by_retry=flood.settled or 0,
        survivor_failures=0,
        duplicates=0,
        lost=0,
        seconds=round(time.monotonic() - started, 1),
    )
