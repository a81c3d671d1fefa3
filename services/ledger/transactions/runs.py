"""Registering a run and reading it back."""

from __future__ import annotations

from services.ledger.database import single_statement_read
from services.ledger.domain.execution import grantable_lease
from services.ledger.domain.runs import Run, RunReading, RunSpec, check_identifier
from services.ledger.repository import runs as run_rows
from services.ledger.transactions.base import (
    LedgerContext,
    retry_on_unique_conflict,
    run_not_found,
)
from shared.runtime.errors import Conflict


@retry_on_unique_conflict
def create(context: LedgerContext, spec: RunSpec, actor: str) -> tuple[Run, bool]:
    """Register a run; an identical repeat returns the stored run with created=False."""
    spec.validate()
    with context.engine.begin() as connection:
        existing = run_rows.get_run(connection, spec.run_id)
        if existing is None:
            run = Run(spec, actor, context.now(), spec.digest)
            run_rows.insert_run(connection, run)
            return run, True
    if existing.spec != spec:
        raise Conflict(
            "RUN_CONFLICT",
            f"run {spec.run_id} is already registered with different content",
            metadata={"run_id": spec.run_id, "stored_run_digest": existing.run_digest},
        )
    return existing, False


def get(context: LedgerContext, run_id: str) -> RunReading:
    """The run, its journal head and the lease a grant made now may carry: one statement, which
    sees one snapshot on its own (no transaction around it on PostgreSQL)."""
    check_identifier("run_id", run_id)
    with single_statement_read(context.engine) as connection:
        found = run_rows.get_run_with_head_and_policy(connection, run_id)
    if found is None:
        raise run_not_found(run_id)
    run, head, policy = found
    window = policy.settings.window_seconds
    return RunReading(run, head, grantable_lease(window, run, context.clock()))
