"""`python -m services.ledger`: serve the ledger, policy and execution services.

The ledger does not migrate its database: its health is NOT_SERVING while the database does not
answer or its schema is at a revision outside the range this release serves
(services/ledger/schema_revisions.py), and SERVING as soon as both hold. It exits non-zero only
when PostgreSQL answers at start-up and will not run its writes at READ COMMITTED. On PostgreSQL
leases and ``recorded_at`` are measured on the database's clock (services/ledger/database_clock.py,
ADR 0057), and the ledger is NOT_SERVING until it has read that clock once.
`python -m services.ledger.migrate` (the migration job, `make db-upgrade`) and `make run` apply
the migrations.
"""

from __future__ import annotations

import logging
import os
import sys

from services.ledger.database import make_engine
from services.ledger.database_clock import started_clock
from services.ledger.domain.signing import HeadSigner
from services.ledger.domain.verifier import load_verifier
from services.ledger.expiry_sweep import ExpirySweeper
from services.ledger.observability import export_ledger_metrics
from services.ledger.schema_revisions import DatabaseCheck
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from shared.continuity.serving import profile_preflight
from shared.continuity.timeutil import utc_now
from shared.runtime.auth import PrincipalsFile
from shared.runtime.bootstrap import BuildResult, run_service
from shared.runtime.config import Settings
from shared.runtime.errors import FailedPrecondition
from shared.runtime.limits import expiry_sweep_seconds
from shared.runtime.readiness import Check

# The deployment's reconciliation verifier, "package.module:attribute"; unset: the refusing default.
VERIFIER_VARIABLE = "FORGE_RECONCILIATION_VERIFIER"
# The Ed25519 key that signs every journal head, and earlier public keys still published (ADR 0015).
SIGNING_KEY_VARIABLE = "FORGE_SIGNING_KEY_FILE"
PUBLISHED_KEYS_VARIABLE = "FORGE_SIGNING_PUBLISHED_KEYS_FILE"
# Exit status when the database runs write transactions at another level than READ COMMITTED.
EXIT_ISOLATION_UNSUPPORTED = 4
REFUSALS = {"DATABASE_ISOLATION_UNSUPPORTED": EXIT_ISOLATION_UNSUPPORTED}


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
    def build(settings: Settings, principals: PrincipalsFile) -> BuildResult:
        engine = make_engine(settings.database_url, settings.database)
        database = DatabaseCheck(engine)
        try:
            database.at_start_up()
        except FailedPrecondition:
            engine.dispose()
            raise
        # PostgreSQL: leases and recorded_at on the database's clock, one for every replica
        # (ADR 0057); SQLite: the host's, which is the database's there.
        clock = started_clock(engine)
        ledger = Ledger(
            engine,
            clock if clock is not None else utc_now,
            # The roles authentication uses, from the same followed file (shared.runtime.auth).
            authority=principals.role_names,
            verifier=load_verifier(os.environ.get(VERIFIER_VARIABLE, "")),
            signer=load_signer(),
        )
        export_ledger_metrics(engine, ledger)
        sweeper = ExpirySweeper(ledger.sweep_expired, expiry_sweep_seconds()).start()

        def cleanup() -> None:
            sweeper.stop()
            if clock is not None:
                clock.stop()
            engine.dispose()

        checks: dict[str, Check] = {"database": database}
        if clock is not None:
            checks["database_clock"] = clock.unread
        return BuildResult(bindings(ledger), cleanup, checks=checks)

    try:
        return run_service(
            "ledger",
            argv if argv is not None else sys.argv[1:],
            build,
            preflight=profile_preflight,
        )
    except FailedPrecondition as refused:
        if refused.reason not in REFUSALS:
            raise
        logging.getLogger("forge.ledger").error(
            "refusing to serve: %s %s", refused.reason, refused.message
        )
        return REFUSALS[refused.reason]


if __name__ == "__main__":
    raise SystemExit(main())
