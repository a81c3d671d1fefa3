"""`python -m services.ledger`: apply migrations, then serve the ledger, policy and execution
services."""

from __future__ import annotations

import sys

from services.ledger.database import make_engine, upgrade
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from shared.bootstrap import BuildResult, run_service
from shared.config import Settings


def main(argv: list[str] | None = None) -> int:
    def build(settings: Settings) -> BuildResult:
        engine = make_engine(settings.database_url)
        upgrade(engine)
        return bindings(Ledger(engine)), engine.dispose

    return run_service("ledger", argv if argv is not None else sys.argv[1:], build)


if __name__ == "__main__":
    raise SystemExit(main())
