"""`python -m services.ledger`: serve the ledger, policy and execution services.

The ledger does not migrate its database: it checks the schema revision at start-up and exits
non-zero on a stale one (as it does when PostgreSQL will not run its writes at READ COMMITTED).
`python -m services.ledger.migrate` (the migration job, `make db-upgrade`) and `make run` apply
the migrations.
"""

from __future__ import annotations

import logging
import os
import sys

from services.ledger.database import (
    make_engine,
    require_current_schema,
    require_write_isolation,
)
from services.ledger.domain.signing import HeadSigner
from services.ledger.domain.verifier import load_verifier
from services.ledger.observability import export_ledger_metrics
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from shared.runtime.auth import current_role_names
from shared.runtime.bootstrap import BuildResult, run_service
from shared.runtime.config import Settings
from shared.runtime.errors import FailedPrecondition

# The deployment's reconciliation verifier, "package.module:attribute"; unset: the refusing default.
VERIFIER_VARIABLE = "FORGE_RECONCILIATION_VERIFIER"
# The Ed25519 key that signs every journal head, and earlier public keys still published (ADR 0015).
SIGNING_KEY_VARIABLE = "FORGE_SIGNING_KEY_FILE"
PUBLISHED_KEYS_VARIABLE = "FORGE_SIGNING_PUBLISHED_KEYS_FILE"
# Exit status when the database schema is not at the revision this release requires.
EXIT_SCHEMA_STALE = 3
# Exit status when the database runs write transactions at another level than READ COMMITTED.
EXIT_ISOLATION_UNSUPPORTED = 4
REFUSALS = {
    "SCHEMA_REVISION_STALE": EXIT_SCHEMA_STALE,
    "DATABASE_ISOLATION_UNSUPPORTED": EXIT_ISOLATION_UNSUPPORTED,
}


def load_signer() -> HeadSigner | None:
    """The head signer the environment names; None (heads unsigned, a warning) when unset."""
    key_file = os.environ.get(SIGNING_KEY_VARIABLE, "")
    if not key_file:
        logging.getLogger("forge.ledger").warning(
            "%s is unset: journal heads are not signed, so an offline audit cannot refuse a "
            "rewrite from genesis",
            SIGNING_KEY_VARIABLE,
        )
        return None
    return HeadSigner.from_files(key_file, os.environ.get(PUBLISHED_KEYS_VARIABLE, ""))


def main(argv: list[str] | None = None) -> int:
    def build(settings: Settings) -> BuildResult:
        engine = make_engine(settings.database_url, settings.database)
        try:
            require_current_schema(engine)
            require_write_isolation(engine)
        except FailedPrecondition:
            engine.dispose()
            raise
        ledger = Ledger(
            engine,
            authority=current_role_names(settings.principals_file),
            verifier=load_verifier(os.environ.get(VERIFIER_VARIABLE, "")),
            signer=load_signer(),
        )
        export_ledger_metrics(engine, ledger)
        return bindings(ledger), engine.dispose

    try:
        return run_service("ledger", argv if argv is not None else sys.argv[1:], build)
    except FailedPrecondition as refused:
        if refused.reason not in REFUSALS:
            raise
        logging.getLogger("forge.ledger").error(
            "refusing to serve: %s %s", refused.reason, refused.message
        )
        return REFUSALS[refused.reason]


if __name__ == "__main__":
    raise SystemExit(main())
