"""The reconciliation verifier for workers on the ledger's own host, in its pid namespace
(``FORGE_RECONCILIATION_VERIFIER=local-process``; ADR 0017).

It proves facts it can observe, and nothing it cannot:

- **cessation of exactly the recorded owner instance**: the claim of the request's current
  generation recorded the claiming process (host boot id, pid, start time, pid namespace; see
  ``services/ledger/domain/owner_instance.py``). On this boot and in this pid namespace, the
  owner has ceased when no process has that pid, or the process with that pid started at
  another time (the pid was reused: it is not the owner), or it has exited and awaits reaping
  (a zombie runs no code). Another boot id (another host, or an earlier boot this verifier
  cannot tell from one), another pid namespace (another container), or a ``/proc`` that may hide
  other users' processes (``hidepid``) proves nothing;
- **the effect class, from the journal**: the worker journals every effect's intent before the
  effect and its outcome after it. No open intent under the request: no effect whose result
  the journal does not hold (``no_effect``). Only open intents of read-only grants: the effect
  may have happened but changed nothing, so the stage is ``retry_safe``. Any other open intent
  (a command, or a tool the grant table does not call read-only): ``unknown``, nothing proven;
- **exposure within the reservation**: no tool outcome of the run is a durable unknown, and the
  commands charged (each before it ran) stay within the run's command limit.

The evidence reference is not trusted for any of these; the ledger records it with the proof.
"""

from __future__ import annotations

from pathlib import Path

from services.ledger.domain.intents import OpenIntent
from services.ledger.domain.owner_instance import OwnerInstance
from services.ledger.domain.reconciliation import Claim, Snapshot
from services.ledger.domain.verifier import VerificationProof, VerificationSubject
from shared.runtime.host_process import (
    PROC,
    boot_id,
    hides_processes,
    pid_namespace,
    process_stat,
)

#: How long a proof counts: a ceased process never comes back, the bound is the ledger's cap on
#: how stale a reviewed fact may be.
VALID_FOR_SECONDS = 900
#: The grant of tools whose effects only read.
READ_ONLY_GRANT = "read"


def observable_owner(claim: Claim | None, proc: Path = PROC) -> OwnerInstance | str:
    """The owner instance of ``claim`` when this verifier can observe its process table, else
    why it cannot."""
    if claim is None:
        return "no claim of the request's current lease generation"
    owner = claim.owner
    if owner is None:
        return f"the claim at journal sequence {claim.sequence} recorded no owner instance"
    here, mine = (
        boot_id(proc / "sys" / "kernel" / "random" / "boot_id"),
        pid_namespace("self", proc),
    )
    unobservable = (
        (
            owner.host_boot_id != here,
            f"the owner ran on host boot {owner.host_boot_id}, this host is boot {here}: another "
            "host or an earlier boot, which this verifier cannot observe",
        ),
        (
            not owner.pid_namespace,
            "the claim recorded no pid namespace; the pid cannot be looked up safely",
        ),
        (
            owner.pid_namespace != mine,
            f"the owner's pid namespace {owner.pid_namespace} is not this verifier's {mine}: "
            "its process table cannot be observed from here",
        ),
        (
            hides_processes(proc),
            f"{proc} may hide other users' processes (hidepid): a missing pid proves nothing",
        ),
    )
    return next((why for hidden, why in unobservable if hidden), owner)


def cessation(claim: Claim | None, proc: Path = PROC) -> tuple[bool, str]:
    """Whether the owner instance ``claim`` recorded has ceased, as this host observes it."""
    owner = observable_owner(claim, proc)
    if isinstance(owner, str):
        return False, owner
    stat = process_stat(owner.pid, proc)
    if stat is None:
        return True, f"no process {owner.pid} exists on this boot"
    if stat.start_ticks != owner.process_start_ticks:
        return True, (
            f"pid {owner.pid} now names another process (started at tick {stat.start_ticks}, "
            f"the owner at {owner.process_start_ticks})"
        )
    if stat.ended:
        return True, f"process {owner.pid} has exited (state {stat.state}, not yet reaped)"
    return False, (
        f"process {owner.pid} started at tick {owner.process_start_ticks} is still running "
        f"(state {stat.state})"
    )


def effect_class(open_intents: tuple[OpenIntent, ...]) -> tuple[str, str]:
    """``no_effect``, ``retry_safe`` or ``unknown`` from the request's open effect intents."""
    if not open_intents:
        return "no_effect", "no open effect intent"
    named = ", ".join(f"{i.call_id} {i.tool_name} ({i.grant or 'no grant'})" for i in open_intents)
    if all(intent.grant == READ_ONLY_GRANT for intent in open_intents):
        return "retry_safe", f"only read-only intents are open: {named}"
    return "unknown", f"open intents whose effect is not known: {named}"


class LocalProcessVerifier:
    """Proves cessation of a same-host, same-namespace owner instance and classifies effects
    from the journal (module docstring)."""

    name = "local-process"

    def __init__(self, proc: Path = PROC) -> None:
        self._proc = proc

    def verify(self, subject: VerificationSubject) -> VerificationProof:
        snapshot: Snapshot = subject.snapshot
        ceased, why = cessation(snapshot.current_claim, self._proc)
        effect, effect_why = effect_class(snapshot.open_intents)
        within = not snapshot.uncertain and snapshot.commands_used <= snapshot.command_limit
        exposure = f"{snapshot.commands_used} of {snapshot.command_limit} commands" + (
            f", durable unknown outcomes {', '.join(snapshot.uncertain)}"
            if snapshot.uncertain
            else ""
        )
        return VerificationProof(
            cessation_verified=ceased,
            exposure_within_reservation=within,
            effect=effect,
            valid_for_seconds=VALID_FOR_SECONDS,
            detail=f"{why}; {effect_why}; {exposure}",
        )
