"""Scenarios 1-4 of the replica suite: admissions raced across the two lanes (tests/scale/
harness.py). Each is a function over running :class:`Replicas`, so the same scenario runs on the
schema directly (under the server's default isolation and under a REPEATABLE READ connection
default) and behind PgBouncer; run ids carry the variant and the scenario.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import grpc
from sqlalchemy import bindparam, text

from forge.continuity.v1 import admission_pb2, admission_pb2_grpc, common_pb2
from shared.contract.terms import PENDING_STATE_NAMES
from tests.admission.conftest import submission
from tests.ledger.admission_support import commit_request, seed
from tests.scale.harness import UNKNOWN_OUTCOMES, Replicas, outcome, report, scale, tally
from tests.support import whole_journal

Response = admission_pb2.RequestInvalidReadContinuityResponse
Request = admission_pb2.RequestInvalidReadContinuityRequest
SETTLEMENT = common_pb2.JOURNAL_ENTRY_KIND_MIGRATION_SETTLEMENT
#: How long one admission may take under the flood before the scenario fails.
CALL_SECONDS = 120
#: What another identity's request for an admitted consumed graph is refused with (ADR 0003):
#: the ledger's unique check, or admission's own earlier checks once the settlement moved the head.
SECOND_GRAPH_REASONS = frozenset(
    {
        "ALREADY_EXISTS:CONSUMED_GRAPH_ALREADY_ADMITTED",
        "FAILED_PRECONDITION:CANDIDATE_DIGEST_STALE",
        "FAILED_PRECONDITION:CLAIM_OUTSTANDING",
        "ABORTED:JOURNAL_HEAD_STALE",
    }
)
_TICKETS_OF = text("SELECT count(*) FROM admission_tickets WHERE run_id IN :runs").bindparams(
    bindparam("runs", expanding=True)
)
_PENDING_OF = text(
    "SELECT count(*) FROM execution_requests WHERE state IN :states AND run_id IN :runs"
).bindparams(
    bindparam("states", value=list(PENDING_STATE_NAMES), expanding=True),
    bindparam("runs", expanding=True),
)


def _tickets(replicas: Replicas, runs: list[str]) -> int:
    with replicas.engine.connect() as connection:
        return int(connection.execute(_TICKETS_OF, {"runs": runs}).scalar_one())


def _settlements(replicas: Replicas, run_id: str, replica: int) -> int:
    entries = whole_journal(replicas.ledger(replica, "reader-token"), run_id, timeout=30)
    return sum(entry.kind == SETTLEMENT for entry in entries)


def _race(
    stubs: list[admission_pb2_grpc.AdmissionServiceStub], requests: list[Request]
) -> list[Response | str]:
    """``stubs[i]`` sends ``requests[i]``, every caller at once behind one barrier; a refusal
    comes back as ``CODE:REASON``."""
    barrier = threading.Barrier(len(requests), timeout=CALL_SECONDS)

    def one(index: int) -> Response | str:
        barrier.wait()
        try:
            return stubs[index].RequestInvalidReadContinuity(requests[index], timeout=CALL_SECONDS)
        except grpc.RpcError as error:
            return outcome(error)

    with ThreadPoolExecutor(len(requests)) as pool:
        return list(pool.map(one, range(len(requests))))


# --- 1. identical admissions behind a barrier, half per lane -----------------------------------

IDENTICAL_ROUNDS = scale(fast=1, full=20)
IDENTICAL_CALLERS = scale(fast=16, full=64)


def identical_admissions(replicas: Replicas, *, rounds: int = IDENTICAL_ROUNDS) -> None:
    """Exactly one ticket and one settlement per round, every response byte-identical but for
    ``created`` (true once), and not one INTERNAL or UNKNOWN."""
    replicas.set_policy(per_run_ticket_limit=1)
    stubs = [lane.admissions() for lane in replicas.lanes]
    started = time.monotonic()
    runs = []
    for round_number in range(rounds):
        run_id = f"{replicas.variant}-identical-{round_number}"
        runs.append(run_id)
        replicas.seed(run_id, replica=round_number % 2)
        request = submission(replicas.lanes[0].candidate_of(run_id), request_id=f"req-{run_id}")
        outcomes = _race(
            [stubs[i % 2] for i in range(IDENTICAL_CALLERS)], [request] * IDENTICAL_CALLERS
        )
        failures = [o for o in outcomes if isinstance(o, str)]
        assert failures == [], (round_number, tally(failures))
        responses = [o for o in outcomes if isinstance(o, Response)]
        assert sum(r.created for r in responses) == 1, round_number
        assert len({r.ticket.SerializeToString() for r in responses}) == 1, round_number
        for response in responses:
            response.created = False
        assert len({r.SerializeToString() for r in responses}) == 1, round_number
        assert [_settlements(replicas, run_id, replica) for replica in (0, 1)] == [1, 1]
        assert _tickets(replicas, [run_id]) == 1, round_number
    report(
        "replicas_identical_admissions",
        variant=replicas.variant,
        rounds=rounds,
        callers=IDENTICAL_CALLERS,
        requests=rounds * IDENTICAL_CALLERS,
        tickets=_tickets(replicas, runs),
        internal_or_unknown=0,
        seconds=round(time.monotonic() - started, 1),
    )


# --- 2. one consumed graph under different request ids and identities ---------------------------

GRAPH_ROUNDS = scale(fast=1, full=10)
GRAPH_CALLERS = scale(fast=8, full=32)


def one_graph_many_identities(replicas: Replicas, *, rounds: int = GRAPH_ROUNDS) -> None:
    """One ticket per consumed graph whatever the request id and identity, the rest refused with
    a documented reason."""
    replicas.set_policy()
    refusals: list[str] = []
    for round_number in range(rounds):
        run_id = f"{replicas.variant}-graph-{round_number}"
        replicas.seed(run_id, replica=1 - round_number % 2)
        candidate = replicas.lanes[1].candidate_of(run_id)
        stubs = [replicas.lanes[i % 2].admissions(f"op-{i}-token") for i in range(GRAPH_CALLERS)]
        outcomes = _race(
            stubs,
            [submission(candidate, request_id=f"req-{run_id}-{i}") for i in range(GRAPH_CALLERS)],
        )
        refused = [o for o in outcomes if isinstance(o, str)]
        assert len(outcomes) - len(refused) == 1, (round_number, tally(refused))
        assert set(refused) <= SECOND_GRAPH_REASONS, tally(refused)
        assert _tickets(replicas, [run_id]) == 1
        assert _settlements(replicas, run_id, 0) == 1
        refusals += refused
    report(
        "replicas_one_graph_many_identities",
        variant=replicas.variant,
        rounds=rounds,
        identities=GRAPH_CALLERS,
        tickets_per_graph=1,
        refusals=tally(refusals),
    )


# --- 3. a pending cap of 4 with 20 runs split across the lanes ---------------------------------

CAP = scale(fast=2, full=4)
CAP_RUNS = scale(fast=10, full=20)
CAP_ROUNDS = scale(fast=1, full=5)


@dataclass
class Sampler:
    """Counts this scenario's pending requests in SQL while a flood runs; keeps the peak."""

    replicas: Replicas
    runs: list[str]
    peak: int = 0
    samples: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cap-sampler")

    def _run(self) -> None:
        with self.replicas.engine.connect() as connection:
            while not self._stop.is_set():
                count = connection.execute(_PENDING_OF, {"runs": self.runs}).scalar_one()
                connection.rollback()  # a fresh snapshot for the next sample
                self.peak = max(self.peak, int(count))
                self.samples += 1
                time.sleep(0.005)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


def pending_cap(replicas: Replicas, *, rounds: int = CAP_ROUNDS) -> None:
    """At most ``CAP`` pending tickets at every SQL sample and after the flood; every refusal is
    RESOURCE_EXHAUSTED PENDING_TICKET_LIMIT and writes nothing."""
    peak, samples, outcomes = 0, 0, []
    for round_number in range(rounds):
        replicas.drain()
        replicas.set_policy(replica=round_number % 2, pending_ticket_limit=CAP)
        runs = [f"{replicas.variant}-cap-{round_number}-{index}" for index in range(CAP_RUNS)]
        for index, run_id in enumerate(runs):
            replicas.seed(run_id, replica=index % 2)
        requests = [
            submission(replicas.lanes[index % 2].candidate_of(run_id), request_id=f"req-{run_id}")
            for index, run_id in enumerate(runs)
        ]
        stubs = [lane.admissions() for lane in replicas.lanes]
        before = replicas.counts()
        with Sampler(replicas, runs) as sampler:
            raced = _race([stubs[i % 2] for i in range(len(runs))], requests)
        after = replicas.counts()
        round_outcomes = [o if isinstance(o, str) else "OK" for o in raced]
        assert tally(round_outcomes) == {
            "OK": CAP,
            "RESOURCE_EXHAUSTED:PENDING_TICKET_LIMIT": CAP_RUNS - CAP,
        }, tally(round_outcomes)
        assert sampler.samples > 0
        assert sampler.peak <= CAP, sampler.peak
        assert after["admission_tickets"] - before["admission_tickets"] == CAP
        assert after["execution_requests"] - before["execution_requests"] == CAP
        peak, samples = max(peak, sampler.peak), samples + sampler.samples
        outcomes += round_outcomes
    report(
        "replicas_pending_cap",
        variant=replicas.variant,
        rounds=rounds,
        cap=CAP,
        runs=CAP_RUNS,
        sql_samples=samples,
        peak_sampled=peak,
        outcomes=tally(outcomes),
    )


# --- 4. a revocation through ledger 1 during an admission flood on replica 2 ---------------------

FLOOD_RUNS = scale(fast=12, full=60)
FLOOD_SUBMITTERS = scale(fast=3, full=6)


#: One admission of a flood: its run, and the call that sends it.
Send = tuple[str, Callable[[], object]]


@dataclass(frozen=True)
class Timed:
    """One admission of the flood: when it was sent and how it ended."""

    run_id: str
    sent: float
    finished: float
    outcome: str


def _flood_calls(replicas: Replicas, runs: list[str], through: str) -> list[Send]:
    """One admission per run, sent to replica 2: through lane 2's admission service, or as
    admission's own ``CommitAdmission`` straight to ledger 2 (decided under the policy lock
    there, with no candidate check in front). Both are built before the revocation."""
    if through == "admission":
        lane = replicas.lanes[1]
        stub = lane.admissions()
        for index, run_id in enumerate(runs):
            replicas.seed(run_id, replica=index % 2)
        return [
            (
                run_id,
                partial(
                    stub.RequestInvalidReadContinuity,
                    submission(lane.candidate_of(run_id), request_id=f"req-{run_id}"),
                    timeout=CALL_SECONDS,
                ),
            )
            for run_id in runs
        ]
    clients = replicas.clients(1)
    ledger = clients.ledger("service-token")
    commits = [
        commit_request(
            clients, seed(replicas.clients(index % 2), run_id=run_id), request_id=f"req-{run_id}"
        )
        for index, run_id in enumerate(runs)
    ]
    return [
        (request.run_id, partial(ledger.CommitAdmission, request, timeout=CALL_SECONDS))
        for request in commits
    ]


def revocation_during_flood(replicas: Replicas, *, through: str) -> None:
    """No admission sent after the revocation returned is accepted; none is INTERNAL/UNKNOWN;
    the tickets in SQL are exactly the accepted ones."""
    replicas.set_policy(replica=0)
    runs = [f"{replicas.variant}-flood-{through}-{index}" for index in range(FLOOD_RUNS)]
    queue = list(reversed(list(enumerate(_flood_calls(replicas, runs, through)))))
    results: list[Timed] = []
    lock, returned = threading.Lock(), threading.Event()

    def submitter() -> None:
        while True:
            with lock:
                if not queue:
                    return
                index, (run_id, send) = queue.pop()
            if index >= 2 * FLOOD_RUNS // 3:
                # The last third is surely sent after the revocation returned (a fast flood
                # could end before it otherwise); the middle third races it.
                assert returned.wait(timeout=CALL_SECONDS)
            sent = time.monotonic()
            try:
                send()
                ended = "OK"
            except grpc.RpcError as error:
                ended = outcome(error)
            with lock:
                results.append(Timed(run_id, sent, time.monotonic(), ended))

    threads = [threading.Thread(target=submitter) for _ in range(FLOOD_SUBMITTERS)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + CALL_SECONDS
    while len(results) < FLOOD_RUNS // 3:
        assert time.monotonic() < deadline, "the flood did not get going"
        time.sleep(0.005)
    revoke_sent = time.monotonic()
    replicas.set_policy(replica=0, enabled=False)
    revoked = time.monotonic()
    returned.set()
    for thread in threads:
        thread.join()
    after = [r for r in results if r.sent > revoked]
    during = [r for r in results if r.sent <= revoked and r.finished >= revoke_sent]
    accepted = [r for r in results if r.outcome == "OK"]
    assert len(results) == FLOOD_RUNS
    assert after, "no admission was sent after the revocation: the scenario proved nothing"
    assert [r for r in after if r.outcome == "OK"] == []
    assert not [r for r in results if r.outcome.split(":")[0] in UNKNOWN_OUTCOMES]
    assert _tickets(replicas, runs) == len(accepted)
    report(
        "replicas_revocation_during_flood",
        variant=replicas.variant,
        through=through,
        admissions=FLOOD_RUNS,
        accepted_before=len([r for r in accepted if r.sent <= revoked]),
        in_flight_at_revocation=len(during),
        sent_after=len(after),
        accepted_after=0,
        outcomes_after=tally([r.outcome for r in after]),
    )
