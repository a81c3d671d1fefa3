"""`python -m services.ledger.migrate`: apply ledger migrations and exit (the Kubernetes
migration Job, the compose `migrate` service and `make db-upgrade` run this before the ledger
starts; the ledger itself refuses to serve a schema that is not at the required revision)."""

from __future__ import annotations

import dataclasses
import logging
import sys

from services.ledger.database import current_revision, make_engine, upgrade
from shared.runtime.config import load_settings


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = load_settings("ledger", argv if argv is not None else sys.argv[1:])
    # A migration may rewrite a large table: the serving statement timeout does not apply to it
    # (the lock timeout does, so a migration queued behind a long transaction fails instead of
    # stalling every ledger replica queued behind the migration's own lock).
    database = dataclasses.replace(settings.database, statement_timeout_ms=0)
    engine = make_engine(settings.database_url, database)
    try:
        upgrade(engine)
        revision = current_revision(engine)
    finally:
        engine.dispose()
    logging.getLogger("forge.ledger").info("migrations applied: schema at revision %s", revision)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
