"""The fault target of the model (ADR 0058; docs/reliability.md, "Faults between steps"): the
ledger replicas as real processes that can be killed, paused and cut from their database.

    replica A: python -m services.ledger ─ CuttingProxy ──────────── PostgreSQL (one schema)
    replica B: python -m services.ledger ─ PgBouncer (transaction) ─┘
    reconstruction, candidate, admission: in this process; candidate and admission call B

Candidate and admission call B, the replica that is killed, paused and loses its pooler, so an
admission's calls meet those faults too (and its idempotency key is what resolves them); A's
faults (a kill, a pause, a cut around COMMIT) meet the machine's own ledger calls, which go
round both replicas. Both replicas sign with one key file, as a deployment's replicas share one.

Time is not the model's here: a process's clock cannot be moved by the machine, so the fault
target has no clock rule and leases keep their real length (ADR 0058). ``skewed_replica`` is the
hook for the clock decision of issue 49: extra environment for replica A (a faketime
preload, say), off unless the caller passes it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from services.admission.servicer import bindings as admission_bindings
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings as candidate_bindings
from services.demo.provider import RefusingProvider
from services.ledger.database import make_engine
from services.ledger.domain.signing import write_new_key
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.contract.channels import open_channel
from tests.model.harness import ModelClock, ModelStack
from tests.reliability.processes import KillableLedger
from tests.reliability.proxy import CuttingProxy
from tests.scale.pgbouncer import BouncerProcess
from tests.support import admission_downstream, serve

#: Each replica's settings: small pools (two replicas and the samples stay far inside
#: PostgreSQL's connections), the test verifier, one signing key, and no background sweep:
#: the model's queued requests never expire in a sequence, and a sweep's write must not take
#: an armed cut.
REPLICA_ENV = {
    "FORGE_DB_POOL_SIZE": "4",
    "FORGE_DB_MAX_OVERFLOW": "8",
    "FORGE_EXPIRY_SWEEP_SECONDS": "3600",
    # the reconciliation rules' verifier, as the in-process targets' ledgers have it
    "FORGE_RECONCILIATION_VERIFIER": "tests.recovery.test_reconciliation:EvidenceVerifier",
}
#: Behind a transaction-mode pooler, no server-side prepares (ADR 0016).
POOLED_ENV = {"FORGE_DB_SERVER_PREPARES": "false"}
#: Ports are probed free and then bound by the children: a start can lose one to another process.
STARTS = 3


@dataclass
class FaultStack(ModelStack):
    """The model's stack (ledgers[0] is A, ledgers[1] is B) and the handles of its faults."""

    replicas: tuple[KillableLedger, KillableLedger]
    #: Between replica A and PostgreSQL: arms a cut around the next write's COMMIT.
    proxy: CuttingProxy
    #: Between replica B and PostgreSQL: killed and started again on its port.
    bouncer: BouncerProcess


def _through(proxy: CuttingProxy, database_url: str) -> str:
    """``database_url`` with its host and port replaced by the proxy's (same role, schema)."""
    parts = urlsplit(database_url)
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))


def _start(replicas: tuple[KillableLedger, KillableLedger]) -> None:
    for replica in replicas:
        replica.launch()
    for replica in replicas:
        replica.wait_serving()


@contextmanager
def fault_stack(
    database_url: str,
    workdir: Path,
    *,
    skewed_replica: Mapping[str, str] | None = None,
) -> Iterator[FaultStack]:
    """The fault target over ``database_url`` (a migrated ``postgres_schema``).
    ``skewed_replica``: extra environment for replica A only (None: A runs on the host's clock)."""
    workdir.mkdir(parents=True, exist_ok=True)
    key = workdir / "ledger-signing.pem"
    signer = write_new_key(key)
    env = {**REPLICA_ENV, "FORGE_SIGNING_KEY_FILE": str(key)}
    with ExitStack() as stack:
        proxy = CuttingProxy()
        stack.callback(proxy.close)
        bouncer = BouncerProcess(database_url, workdir / "pgbouncer")
        stack.callback(bouncer.stop)
        bouncer.start()
        for attempt in range(1, STARTS + 1):
            replicas = (
                KillableLedger(
                    _through(proxy, database_url),
                    workdir,
                    label="ledger-a",
                    env={**env, **(skewed_replica or {})},
                ),
                KillableLedger(
                    bouncer.bouncer.url, workdir, label="ledger-b", env={**env, **POOLED_ENV}
                ),
            )
            try:
                _start(replicas)
            except AssertionError:
                for replica in replicas:
                    replica.stop()
                if attempt == STARTS:
                    raise
                continue
            break
        for replica in replicas:
            stack.callback(replica.stop)
        sample = make_engine(database_url)
        stack.callback(sample.dispose)
        served_b = replicas[1].served()
        reconstruction = stack.enter_context(serve("reconstruction", reconstruction_bindings()))
        sources = GrpcCandidateSources(
            open_channel(served_b.target, "candidate-service-token"),
            open_channel(reconstruction.target, "candidate-service-token"),
        )
        clock = ModelClock()
        candidate = stack.enter_context(
            serve("candidate", candidate_bindings(sources, clock=clock))
        )
        downstream = admission_downstream(served_b.target, candidate.target)
        admission = stack.enter_context(serve("admission", admission_bindings(downstream)))
        provider = stack.enter_context(RefusingProvider())
        yield FaultStack(
            sample,
            clock,
            signer,
            [replica.served() for replica in replicas],
            candidate,
            admission,
            "postgresql processes+faults",
            provider,
            replicas,
            proxy,
            bouncer,
        )
