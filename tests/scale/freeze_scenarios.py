"""Issue 46 §2: a replica frozen (SIGSTOP) while one of its transactions holds the exclusive
policy lock stalls the other replica's admissions only until PostgreSQL ends the frozen session
(``idle_in_transaction_session_timeout``, which the ledger sets on its sessions; ADR 0042), not
for the server's own idle limit or for ever.

Ledger 1 is kept busy taking the exclusive policy lock (policy writes with a stale expected
revision: each takes the lock, finds the revision moved and writes nothing), and frozen at random
moments until PostgreSQL shows one of its sessions idle in a transaction that holds the lock's
advisory gate. Admissions then go through lane 2 (admission -> candidate -> ledger 2) and are
retried on UNAVAILABLE; every one must be admitted within the idle limit plus one lock wait.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

import grpc
from sqlalchemy import text

from forge.continuity.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from services.ledger.repository.policy import POLICY_GATE_CLASS
from shared.runtime.config import DatabaseSettings
from tests.admission.conftest import submission
from tests.scale.harness import UNKNOWN_OUTCOMES, Replicas, outcome, report, scale, tally

FREEZE_ROUNDS = scale(fast=1, full=3)
#: Admissions sent through lane 2 while ledger 1 is frozen.
PROBES = 4
#: Threads making ledger 1 take the exclusive policy lock over and over.
HOLDERS = 4
#: Freezes tried before one catches ledger 1 holding the lock.
ATTEMPTS = 500
#: What the bound allows beyond the ledger's own limits: the retry pause, a loaded machine.
SLACK_SECONDS = 5.0
CALL_SECONDS = 60.0
#: The sessions idle inside a transaction that holds the policy lock's gate, exclusively.
_FROZEN_HOLDER = text(
    "SELECT a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.classid::bigint = :key "
    "AND l.mode = 'ExclusiveLock' "
    "AND l.granted AND a.state = 'idle in transaction'"
)
_ALIVE = text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid")


def bound_seconds(settings: DatabaseSettings) -> float:
    """How long after the freeze the other replica must admit again, as the docs promise: two
    lock waits. The frozen session is ended after the idle limit (by default the lock timeout);
    an admission that was waiting for the lock then takes it, one that had just given up waits
    one retry pause."""
    return 2 * settings.lock_timeout_ms / 1000 + SLACK_SECONDS


def _stale_write(stub: policy_pb2_grpc.PolicyServiceStub) -> policy_pb2.PutPolicyRequest:
    """A policy write that takes the exclusive lock, finds the revision moved, writes nothing."""
    current = stub.GetPolicy(policy_pb2.GetPolicyRequest(), timeout=CALL_SECONDS).policy
    settings = common_pb2.PolicySettings(
        enabled=current.enabled,
        window_seconds=current.window_seconds,
        per_run_ticket_limit=current.per_run_ticket_limit,
        pending_ticket_limit=current.pending_ticket_limit,
    )
    return policy_pb2.PutPolicyRequest(
        expected_revision=current.revision + 1_000_000, settings=settings
    )


@dataclass
class Holders:
    """Threads calling ledger 1's PutPolicy with a stale revision until stopped."""

    replicas: Replicas
    stop: threading.Event = field(default_factory=threading.Event)
    outcomes: list[str] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def _hold(self) -> None:
        stub = self.replicas.policy(0)
        request = _stale_write(stub)
        while not self.stop.is_set():
            try:
                stub.PutPolicy(request, timeout=CALL_SECONDS)
                self.outcomes.append("OK")
            except grpc.RpcError as error:
                self.outcomes.append(outcome(error))

    def __enter__(self) -> Holders:
        self.threads = [threading.Thread(target=self._hold) for _ in range(HOLDERS)]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=CALL_SECONDS * 2)


def _freeze_holding_the_lock(replicas: Replicas, rng: random.Random) -> tuple[float, int, int]:
    """Freeze ledger 1 until it is caught holding the lock: (frozen at, backend pid, attempts)."""
    ledger = replicas.ledgers[0]
    for attempt in range(1, ATTEMPTS + 1):
        time.sleep(rng.uniform(0, 0.02))
        ledger.freeze()
        frozen_at = time.monotonic()
        # A statement the process had sent still finishes; then its session waits for it.
        deadline = frozen_at + 0.3
        while time.monotonic() < deadline:
            with replicas.engine.connect() as connection:
                pids = list(
                    connection.execute(_FROZEN_HOLDER, {"key": POLICY_GATE_CLASS}).scalars()
                )
            if pids:
                return frozen_at, int(pids[0]), attempt
            time.sleep(0.02)
        ledger.thaw()
    raise AssertionError(f"ledger 1 was never caught holding the policy lock in {ATTEMPTS}")


def _admit(replicas: Replicas, runs: list[str], until: float) -> dict[str, list[tuple[float, str]]]:
    """Each run's admission through lane 2, retried by the same request id on UNAVAILABLE:
    every attempt's (end time, outcome)."""
    lane = replicas.lanes[1]
    requests = {
        run_id: submission(lane.candidate_of(run_id), request_id=f"req-{run_id}") for run_id in runs
    }
    attempts: dict[str, list[tuple[float, str]]] = {run_id: [] for run_id in runs}

    def admit(run_id: str) -> None:
        stub = lane.admissions()
        while time.monotonic() < until:
            try:
                stub.RequestInvalidReadContinuity(requests[run_id], timeout=CALL_SECONDS)
                attempts[run_id].append((time.monotonic(), "OK"))
                return
            except grpc.RpcError as error:
                attempts[run_id].append((time.monotonic(), outcome(error)))
                if error.code() != grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]
                    return
                time.sleep(0.2)

    threads = [threading.Thread(target=admit, args=(run_id,)) for run_id in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return attempts


def _locks_again(replicas: Replicas) -> str:
    """The thawed replica takes the lock again: a stale policy write's answer, after at most a
    few refusals for the sessions PostgreSQL ended while it was frozen."""
    stub = replicas.policy(0)
    request = _stale_write(stub)
    ended = ""
    for _ in range(5):
        try:
            stub.PutPolicy(request, timeout=CALL_SECONDS)
            return "OK"
        except grpc.RpcError as error:
            ended = outcome(error)
            if ended != "UNAVAILABLE:DATABASE_UNAVAILABLE":
                return ended
    return ended


def frozen_lock_holder(replicas: Replicas, *, rounds: int = FREEZE_ROUNDS) -> None:
    """Every admission through the other replica succeeds within the bound after the freeze;
    nothing is INTERNAL or UNKNOWN; the frozen replica serves again once thawed."""
    bound = bound_seconds(DatabaseSettings())  # the replicas run with the default settings
    replicas.set_policy(replica=0)
    rng = random.Random(20261206)
    for round_ in range(rounds):
        runs = [f"{replicas.variant}-freeze-{round_}-{index}" for index in range(PROBES)]
        for run_id in runs:
            replicas.seed(run_id, replica=1)
        with Holders(replicas) as holders:
            frozen_at, pid, tries = _freeze_holding_the_lock(replicas, rng)
            try:
                attempts = _admit(replicas, runs, frozen_at + bound + CALL_SECONDS)
                with replicas.engine.connect() as connection:
                    ended = connection.execute(_ALIVE, {"pid": pid}).scalar_one() == 0
            finally:
                replicas.ledgers[0].thaw()
        outcomes = [o for tried in attempts.values() for _, o in tried]
        admitted = {run_id: tried[-1][0] - frozen_at for run_id, tried in attempts.items()}
        assert ended, "PostgreSQL did not end the frozen replica's session"
        assert [tried[-1][1] for tried in attempts.values()] == ["OK"] * PROBES, attempts
        assert max(admitted.values()) <= bound, (admitted, bound)
        assert not [o for o in outcomes + holders.outcomes if o.split(":")[0] in UNKNOWN_OUTCOMES]
        again = _locks_again(replicas)
        assert again == "ABORTED:POLICY_REVISION_STALE", again
        report(
            "replicas_frozen_lock_holder",
            variant=replicas.variant,
            round=round_,
            freeze_attempts=tries,
            bound_seconds=bound,
            admitted_after_seconds=sorted(round(s, 2) for s in admitted.values()),
            outcomes=tally(outcomes),
            holder_outcomes=tally(holders.outcomes),
        )
