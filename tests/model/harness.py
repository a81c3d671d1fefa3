"""The real services for the model (docs/reliability.md, "The model"): a ledger, a
reconstruction, a candidate and an admission server on loopback ports, in this process, over one
migrated SQLite file. The ledger's clock is the model's: a rule moves it forward, so leases and
tickets expire inside a run of steps instead of being skipped."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine

from services.admission.servicer import bindings as admission_bindings
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings as candidate_bindings
from services.ledger.database import make_engine, migrate
from services.ledger.domain.signing import HeadSigner
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.contract.channels import open_channel
from tests.support import Served, admission_downstream, serve, token_roles


@dataclass
class ModelClock:
    """The ledger's clock: real time plus what the model has advanced it by."""

    offset: timedelta = field(default_factory=timedelta)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


@dataclass
class ModelStack:
    engine: Engine
    clock: ModelClock
    #: The ledger's head signer: the checker verifies the exported bundles against its key.
    signer: HeadSigner
    ledger: Served
    candidate: Served
    admission: Served


@contextmanager
def sqlite_stack(directory: Path) -> Iterator[ModelStack]:
    """One ledger over a fresh SQLite file, and the three services in front of it."""
    url = f"sqlite:///{directory}/model-ledger.db"
    migrate(url)
    engine = make_engine(url)
    clock = ModelClock()
    signer = HeadSigner.generate()
    ledger = Ledger(engine, clock, authority=token_roles, signer=signer)
    with ExitStack() as stack:
        ledger_served = stack.enter_context(serve("ledger", ledger_bindings(ledger)))
        reconstruction = stack.enter_context(serve("reconstruction", reconstruction_bindings()))
        sources = GrpcCandidateSources(
            open_channel(ledger_served.target, "service-token"),
            open_channel(reconstruction.target, "service-token"),
        )
        candidate = stack.enter_context(
            serve("candidate", candidate_bindings(sources, clock=clock))
        )
        downstream = admission_downstream(ledger_served.target, candidate.target)
        admission = stack.enter_context(serve("admission", admission_bindings(downstream)))
        try:
            yield ModelStack(engine, clock, signer, ledger_served, candidate, admission)
        finally:
            engine.dispose()
