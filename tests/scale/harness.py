"""Two ledger replicas on one PostgreSQL schema, as ``make run`` starts services, for the
replica scenarios of issue 21 §1 (docs/reliability.md, "Replicas").

One schema, migrated once (``tests.conftest.postgres_schema``); two ledger processes on it; one
reconstruction; and two lanes, each a candidate and an admission process bound to its own ledger:

    lane 1: admission-1 -> candidate-1 -> ledger-1 ─┐
    lane 2: admission-2 -> candidate-2 -> ledger-2 ─┴─ one PostgreSQL schema
            (both lanes call the one reconstruction)

Every process is ``python -m services.<name>`` on a free loopback port (tests/reliability/
processes.py). ``make scale`` sets ``FORGE_SCALE=full`` and runs the full counts; ``make test``
runs a fast slice. Figures go to stdout and, when ``FORGE_SCALE_RESULTS`` names a file, to it as
JSON lines.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
from sqlalchemy import Engine, bindparam, text

from forge.continuity.v1 import (
    admission_pb2_grpc,
    candidate_pb2,
    candidate_pb2_grpc,
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    ledger_pb2_grpc,
    policy_pb2,
    policy_pb2_grpc,
)
from services.demo.seed import SeededRun, load_fixture, seed_held_run
from services.ledger.database import make_engine
from shared.contract.terms import PENDING_STATE_NAMES
from shared.runtime.errors import from_rpc_error
from tests.ledger.conftest import LedgerClients
from tests.reliability.processes import KillableLedger, ServiceProcess
from tests.reliability.scale import Counts
from tests.support import row_counts

COUNTS = Counts("FORGE_SCALE", "FORGE_SCALE_RESULTS", "SCALE")
FULL = COUNTS.full
scale = COUNTS.scale
report = COUNTS.report
FIXTURE = load_fixture("v1_basic")
#: Each replica's pool: two replicas, the lanes and the sampler stay well inside PostgreSQL's
#: default 100 connections (the pool size is a setting since ADR 0016).
REPLICA_POOL = {"FORGE_DB_POOL_SIZE": "4", "FORGE_DB_MAX_OVERFLOW": "12"}
#: A cap no scenario reaches unless it sets its own.
NO_CAP = 100_000
#: Reasons no scenario may ever see: the caller could not tell what happened.
UNKNOWN_OUTCOMES = ("INTERNAL", "UNKNOWN")
_PENDING = text(
    "SELECT execution_request_id FROM execution_requests WHERE state IN :states"
).bindparams(bindparam("states", value=list(PENDING_STATE_NAMES), expanding=True))


def outcome(error: grpc.RpcError) -> str:
    """``CODE:REASON`` of a refusal."""
    return f"{error.code().name}:{from_rpc_error(error).reason}"  # type: ignore[attr-defined]


def tally(outcomes: list[str]) -> dict[str, int]:
    return {name: outcomes.count(name) for name in sorted(set(outcomes))}


@dataclass
class Lane:
    """One candidate and one admission process, bound to one ledger replica."""

    ledger: KillableLedger
    candidate: ServiceProcess
    admission: ServiceProcess

    def admissions(self, token: str = "operator-token") -> admission_pb2_grpc.AdmissionServiceStub:
        return admission_pb2_grpc.AdmissionServiceStub(self.admission.served().channel(token))

    def candidate_of(self, run_id: str) -> candidate_pb2.InvalidReadContinuityCandidate:
        stub = candidate_pb2_grpc.CandidateServiceStub(
            self.candidate.served().channel("operator-token")
        )
        request = candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_id)
        return stub.GetInvalidReadContinuityCandidate(request, timeout=60).candidate


@dataclass
class Replicas:
    """The running processes, and the schema's own engine for SQL samples."""

    engine: Engine
    ledgers: tuple[KillableLedger, KillableLedger]
    reconstruction: ServiceProcess
    lanes: tuple[Lane, Lane]
    #: How the ledgers reach the schema (figures and run ids carry it).
    variant: str

    def clients(self, replica: int) -> LedgerClients:
        """Clients of ledger ``replica`` (0 or 1)."""
        return self.ledgers[replica].clients()

    def ledger(
        self, replica: int, token: str = "writer-token"
    ) -> ledger_pb2_grpc.LedgerServiceStub:
        return self.clients(replica).ledger(token)

    def execution(
        self, replica: int, token: str = "worker-token"
    ) -> execution_pb2_grpc.ExecutionServiceStub:
        return execution_pb2_grpc.ExecutionServiceStub(self.clients(replica).channel(token))

    def policy(self, replica: int, token: str = "admin-token") -> policy_pb2_grpc.PolicyServiceStub:
        return self.clients(replica).policy(token)

    def set_policy(self, replica: int = 0, **settings: object) -> common_pb2.Policy:
        """Enable the policy through ledger ``replica`` with ``settings`` (no cap unless set)."""
        stub = self.policy(replica)
        current = stub.GetPolicy(policy_pb2.GetPolicyRequest(), timeout=30).policy
        values: dict[str, object] = {
            "enabled": True,
            "window_seconds": 3600,
            "pending_ticket_limit": NO_CAP,
        }
        values.update(settings)
        request = policy_pb2.PutPolicyRequest(
            expected_revision=current.revision,
            settings=common_pb2.PolicySettings(**values),  # type: ignore[arg-type]
        )
        return stub.PutPolicy(request, timeout=30).policy

    def seed(self, run_id: str, replica: int = 0) -> SeededRun:
        """A held run (the v1 fixture), written through ledger ``replica``."""
        return seed_held_run(self.ledger(replica), FIXTURE, run_id)

    def pending(self) -> list[str]:
        """Execution requests queued or claimed, read in SQL (what the pending cap counts)."""
        with self.engine.connect() as connection:
            return list(connection.execute(_PENDING).scalars())

    def drain(self) -> None:
        """Cancel every pending request left by earlier scenarios, so a cap counts only the
        scenario's own (an administrator's cancel, through ledger 2)."""
        stub = self.execution(1, "admin-token")
        for execution_request_id in self.pending():
            stub.CancelExecutionRequest(
                execution_pb2.CancelExecutionRequestRequest(
                    execution_request_id=execution_request_id, reason="scale scenario reset"
                ),
                timeout=30,
            )
        assert self.pending() == []

    def counts(self) -> dict[str, int]:
        return row_counts(self.engine)

    def restart(self, replica: int) -> None:
        """Start a killed ledger again on its port; wait until its lane serves again."""
        self.ledgers[replica].start()
        self.lanes[replica].candidate.wait_serving()
        self.lanes[replica].admission.wait_serving()


def _lane(
    index: int, ledger: KillableLedger, reconstruction: ServiceProcess, workdir: Path
) -> Lane:
    calls = {
        "FORGE_LEDGER_TARGET": ledger.target,
        "FORGE_RECONSTRUCTION_TARGET": reconstruction.target,
    }
    candidate = ServiceProcess(
        "candidate",
        workdir,
        label=f"candidate-{index}",
        env={**calls, "FORGE_SERVICE_TOKEN": "candidate-service-token"},
    )
    admission = ServiceProcess(
        "admission",
        workdir,
        label=f"admission-{index}",
        env={
            **calls,
            "FORGE_CANDIDATE_TARGET": candidate.target,
            "FORGE_SERVICE_TOKEN": "service-token",
        },
    )
    return Lane(ledger, candidate, admission)


# Ports are probed free and then bound by the child processes: another process (an outgoing
# connection's ephemeral port, say) can take one in between. The seven start again on new ports.
STARTS = 3
PORT_TAKEN = "Address already in use"


@contextmanager
def running_replicas(
    database_url: str,
    workdir: Path,
    *,
    variant: str,
    ledger_url: str = "",
    ledger_env: Mapping[str, str] | None = None,
) -> Iterator[Replicas]:
    """The seven processes over ``database_url`` (a migrated schema). The ledgers connect at
    ``ledger_url`` when given (PgBouncer, say) with ``ledger_env`` added to their settings; the
    SQL samples always read ``database_url`` directly."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**REPLICA_POOL, **(ledger_env or {})}
    for start in range(1, STARTS + 1):
        ledgers = (
            KillableLedger(ledger_url or database_url, workdir, label="ledger-1", env=env),
            KillableLedger(ledger_url or database_url, workdir, label="ledger-2", env=env),
        )
        reconstruction = ServiceProcess("reconstruction", workdir)
        lanes = (
            _lane(1, ledgers[0], reconstruction, workdir),
            _lane(2, ledgers[1], reconstruction, workdir),
        )
        processes = [
            *ledgers,
            reconstruction,
            *(process for lane in lanes for process in (lane.candidate, lane.admission)),
        ]
        # All at once: each reports SERVING only when what it calls does, so they come up in
        # dependency order by themselves.
        try:
            for process in processes:
                process.launch()
            for process in processes:
                process.wait_serving()
        except AssertionError as failed:
            for process in processes:
                process.stop()
            if start == STARTS or PORT_TAKEN not in str(failed):
                raise
            continue
        break
    engine = make_engine(database_url)
    with ExitStack() as cleanup:
        cleanup.callback(engine.dispose)
        for process in processes:
            cleanup.callback(process.stop)
        yield Replicas(engine, ledgers, reconstruction, lanes, variant)
