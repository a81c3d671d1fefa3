"""`python -m services.ledger`: apply migrations, then serve the ledger, policy and execution
services."""

from __future__ import annotations

import sys

from services.ledger.database import make_engine, upgrade
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from shared.bootstrap import run_service


def main(argv: list[str] | None = None) -> int:
    def build(settings):  # type: ignore[no-untyped-def]
        engine = make_engine(settings.database_url)
        upgrade(engine)
        return bindings(Ledger(engine)), engine.dispose

    return run_service("ledger", argv if argv is not None else sys.argv[1:], build)


if __name__ == "__main__":
    raise SystemExit(main())
