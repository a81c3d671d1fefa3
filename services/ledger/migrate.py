"""`python -m services.ledger.migrate`: apply ledger migrations and exit (the Kubernetes
migration Job runs this before the ledger Deployment starts)."""

from __future__ import annotations

import logging
import sys

from services.ledger.database import make_engine, upgrade
from shared.config import load_settings


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = load_settings("ledger", argv if argv is not None else sys.argv[1:])
    engine = make_engine(settings.database_url)
    upgrade(engine)
    engine.dispose()
    logging.getLogger("forge.ledger").info("migrations applied")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
