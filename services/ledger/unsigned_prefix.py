"""``python -m services.ledger.unsigned_prefix RUN_ID --by NAME``: an operator declares that a
run's entries up to its current head (or ``--through N``) were written before the ledger signed
heads (a ledger that ran without a key), so a ledger with a key may sign over them once. The
next signature names the declared prefix for every verifier to see (ADR 0015).

It runs with the migration's database credentials (the ledger's own role may only read the
declarations), prints what it declared, and refuses when the run already has a chained
signature (its history is signed: nothing to declare) or a declaration.

Exit status: 0 declared; 1 refused; 2 usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys

from sqlalchemy import Connection

from services.ledger.database import make_engine
from services.ledger.domain.signing import SIGNED_HEAD_FORMAT
from services.ledger.repository import declarations, journal_reads
from services.ledger.repository import signed_heads as signed_head_rows
from shared.continuity.timeutil import to_text, utc_now
from shared.runtime.config import load_settings

EXIT_DECLARED, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2


class Refused(Exception):
    """The declaration would say something untrue or redundant."""


def declare(connection: Connection, run_id: str, through: int | None, by: str) -> int:
    """Declare the run's prefix up to ``through`` (default: its head); returns the sequence."""
    head_sequence, _ = journal_reads.journal_head(connection, run_id)
    if head_sequence == 0:
        raise Refused(f"run {run_id} has no entries (or does not exist)")
    through = head_sequence if through is None else through
    if not 0 < through <= head_sequence:
        raise Refused(f"--through must be between 1 and the head, {head_sequence}")
    newest = signed_head_rows.newest_signed_head(connection, run_id)
    if newest is not None and newest.format == SIGNED_HEAD_FORMAT:
        raise Refused(f"run {run_id} already has chained signatures: its history is signed")
    if signed_head_rows.unsigned_prefix(connection, run_id):
        raise Refused(f"run {run_id} already has a declared prefix")
    declarations.declare_unsigned_prefix(connection, run_id, through, to_text(utc_now()), by)
    return through


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(
        prog="python -m services.ledger.unsigned_prefix",
        description="Declare a run's entries written before heads were signed (ADR 0015).",
    )
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("--by", required=True, help="who declares it (recorded)")
    parser.add_argument("--through", type=int, help="the last unsigned sequence (default: head)")
    args, rest = parser.parse_known_args(argv if argv is not None else sys.argv[1:])
    settings = load_settings("ledger", rest)
    database = dataclasses.replace(settings.database, statement_timeout_ms=0)
    engine = make_engine(settings.database_url, database)
    try:
        with engine.begin() as connection:
            through = declare(connection, args.run_id, args.through, args.by)
    except Refused as refused:
        sys.stderr.write(f"refused: {refused}\n")
        return EXIT_REFUSED
    finally:
        engine.dispose()
    logging.getLogger("forge.ledger").warning(
        "declared unsigned prefix: run_id=%s through_sequence=%d declared_by=%s",
        args.run_id, through, args.by,
    )  # fmt: skip
    return EXIT_DECLARED


if __name__ == "__main__":
    raise SystemExit(main())
