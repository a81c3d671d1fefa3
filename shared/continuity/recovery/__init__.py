"""The recovery-workflow registry: every recovery workflow, by its stored name
(docs/adr/0013-recovery-workflow-registry.md).

The candidate, admission and ledger services, the client and the CLI route by workflow through
:data:`WORKFLOWS`: the candidate and admission build their recovery RPCs from each descriptor's
:class:`Rpcs`, the ledger's one commit transaction asks the descriptor what the evidence proves
and what to record. Adding a workflow adds its package here (and its contract), not a branch:
docs/workflows/README.md ("Add a recovery workflow") lists the files.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from shared.continuity.admissibility_facts import Situation
from shared.continuity.derived_checkpoint import DerivedCheckpoint
from shared.continuity.recovery.never_claimed import descriptor as never_claimed
from shared.continuity.recovery.readonly_observation import descriptor as readonly_observation
from shared.continuity.recovery.rejected_boundary import descriptor as rejected_boundary
from shared.continuity.recovery.workflow import (
    INPUT_FIELDS,
    Applies,
    ContentOf,
    Evidence,
    Inputs,
    Rpc,
    Rpcs,
    Wording,
    Workflow,
)
from shared.runtime.errors import InvalidArgument, field_invalid

__all__ = [
    "INPUT_FIELDS",
    "WORKFLOWS",
    "Applies",
    "ContentOf",
    "DerivedCheckpoint",
    "Evidence",
    "Inputs",
    "Rpc",
    "Rpcs",
    "Situation",
    "Wording",
    "Workflow",
    "by_number",
    "registered",
    "workflow",
]

#: Every recovery workflow by its stored name, in contract order.
WORKFLOWS: dict[str, Workflow] = {
    found.name: found
    for found in (never_claimed.WORKFLOW, rejected_boundary.WORKFLOW, readonly_observation.WORKFLOW)
}


def _unknown(field: str, value: object) -> InvalidArgument:
    return field_invalid(
        field, f"unknown workflow {value!r}", f"{field} must be one of {', '.join(WORKFLOWS)}"
    )


def workflow(name: str) -> Workflow:
    """The workflow stored as ``name``; INVALID_ARGUMENT FIELD_INVALID for any other name."""
    found = WORKFLOWS.get(name)
    if found is None:
        raise _unknown("workflow", name)
    return found


def by_number(number: int) -> Workflow:
    """The workflow of a contract ``RecoveryWorkflow`` value; INVALID_ARGUMENT FIELD_INVALID for
    an unknown or unspecified one."""
    for found in WORKFLOWS.values():
        if found.number == number:
            return found
    raise _unknown("workflow", number)


@contextmanager
def registered(added: Workflow) -> Iterator[Workflow]:
    """Register ``added`` while the block runs (a test's own workflow); services built inside the
    block route it like any other."""
    if added.name in WORKFLOWS or any(w.number == added.number for w in WORKFLOWS.values()):
        raise ValueError(f"workflow {added.name} ({added.number}) is already registered")
    WORKFLOWS[added.name] = added
    try:
        yield added
    finally:
        del WORKFLOWS[added.name]
