"""The real services for the model (docs/reliability.md, "The model and the history checker"):
ledger replicas, a reconstruction, a candidate and an admission server on loopback ports, in this
process, over one migrated database, and a loopback provider refusing every request. Two targets:

- **SQLite**: one ledger over a fresh file;
- **PostgreSQL**: two ledger replicas over one fresh schema, the second through a real PgBouncer
  in transaction mode (server-side prepares off, ADR 0016); the candidate and admission call the
  second, and the machine spreads its own calls across both.

The ledgers' and the candidate's clock is the model's: a rule moves it forward, so leases and
tickets expire inside a sequence instead of being skipped. Both replicas sign with one key, as a
deployment's replicas share theirs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine

from services.admission.servicer import bindings as admission_bindings
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings as candidate_bindings
from services.demo.provider import RefusingProvider
from services.ledger.database import make_engine, migrate
from services.ledger.domain.signing import HeadSigner
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.contract.channels import open_channel
from shared.runtime.config import DatabaseSettings
from tests.recovery.test_reconciliation import EvidenceVerifier
from tests.support import Served, admission_downstream, serve, token_roles


@dataclass
class ModelClock:
    """The services' clock: real time plus what the model has advanced it by."""

    offset: timedelta = field(default_factory=timedelta)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


@dataclass
class ModelStack:
    #: The database, for the invariants' SQL samples (never for the rules' calls).
    engine: Engine
    clock: ModelClock
    #: The ledgers' head signer: the checker verifies the exported bundles against its key.
    signer: HeadSigner
    #: Every ledger replica; the candidate and admission call the last.
    ledgers: Sequence[Served]
    candidate: Served
    admission: Served
    #: How the ledgers reach the database (reports name it).
    target: str
    #: The loopback provider that refuses every request (the native turns' provider).
    provider: RefusingProvider

    @property
    def ledger(self) -> Served:
        return self.ledgers[-1]


@contextmanager
def _services(engines: Sequence[Engine], sample: Engine, target: str) -> Iterator[ModelStack]:
    clock = ModelClock()
    signer = HeadSigner.generate()
    with ExitStack() as stack:
        ledgers = [
            stack.enter_context(
                serve(
                    "ledger",
                    ledger_bindings(
                        Ledger(
                            engine,
                            clock,
                            authority=token_roles,
                            signer=signer,
                            verifier=EvidenceVerifier(),
                        )
                    ),
                )
            )
            for engine in engines
        ]
        reconstruction = stack.enter_context(serve("reconstruction", reconstruction_bindings()))
        sources = GrpcCandidateSources(
            open_channel(ledgers[-1].target, "candidate-service-token"),
            open_channel(reconstruction.target, "candidate-service-token"),
        )
        candidate = stack.enter_context(
            serve("candidate", candidate_bindings(sources, clock=clock))
        )
        downstream = admission_downstream(ledgers[-1].target, candidate.target)
        admission = stack.enter_context(serve("admission", admission_bindings(downstream)))
        provider = stack.enter_context(RefusingProvider())
        yield ModelStack(sample, clock, signer, ledgers, candidate, admission, target, provider)


@contextmanager
def sqlite_stack(directory: Path) -> Iterator[ModelStack]:
    """One ledger over a fresh SQLite file, and the three services in front of it."""
    url = f"sqlite:///{directory}/model-ledger.db"
    migrate(url)
    engine = make_engine(url)
    try:
        with _services([engine], engine, "sqlite") as stack:
            yield stack
    finally:
        engine.dispose()


@contextmanager
def postgres_stack(database_url: str, bouncer_url: str) -> Iterator[ModelStack]:
    """Two ledger replicas over one migrated schema (``database_url``), the second through
    PgBouncer (``bouncer_url``, transaction pooling), and the three services in front."""
    direct = make_engine(database_url)
    pooled = make_engine(bouncer_url, DatabaseSettings(server_prepares=False))
    try:
        with _services([direct, pooled], direct, "postgresql+pgbouncer") as stack:
            yield stack
    finally:
        pooled.dispose()
        direct.dispose()
