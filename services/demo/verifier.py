"""`make demo`'s reconciliation verifier: a deployment hook for a worker that ran as a local
process on the ledger's own host. Demo only; production verifiers observe their own platform.

Evidence reference: ``local-pid:<pid>;idempotent=<command id>,<command id>...``.

- cessation: the process id no longer exists on this host (the supervisor reaped it);
- exposure within the reservation: no tool outcome of the run is a durable unknown and the
  commands charged (each before it ran) stay within the run's command limit;
- effect: retry-safe when every command charged under the request is declared idempotent in the
  evidence; with none charged, no effect. The idempotency declaration is the simulated part: the
  demo operator asserts it, a production verifier would prove it.
"""

from __future__ import annotations

import os

from services.ledger.domain.verifier import VerificationProof, VerificationSubject

PREFIX = "local-pid:"


def _parse(reference: str) -> tuple[int, frozenset[str]] | None:
    head, _, rest = reference.partition(";")
    if not head.startswith(PREFIX) or not head[len(PREFIX) :].isdigit():
        return None
    idempotent: frozenset[str] = frozenset()
    if rest.startswith("idempotent="):
        idempotent = frozenset(filter(None, rest[len("idempotent=") :].split(",")))
    return int(head[len(PREFIX) :]), idempotent


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, owned by someone else
    return True


class LocalProcessVerifier:
    """Proves cessation of a reaped local worker process; see the module docstring."""

    name = "demo-local-process"

    def verify(self, subject: VerificationSubject) -> VerificationProof:
        parsed = _parse(subject.evidence_reference)
        if parsed is None or parsed[0] <= 1:
            return VerificationProof(False, False, "unknown", 0, "no local-pid evidence")
        pid, idempotent = parsed
        snapshot = subject.snapshot
        stopped = not _process_exists(pid)
        charged = set(snapshot.charged_under_request)
        within = not snapshot.uncertain and snapshot.commands_used <= snapshot.command_limit
        if not charged:
            effect = "no_effect"
        elif charged <= idempotent:
            effect = "retry_safe"
        else:
            effect = "unknown"
        detail = (
            f"process {pid} {'is gone' if stopped else 'still exists'}; "
            f"{len(charged)} command(s) charged under the request, "
            f"{len(charged & idempotent)} declared idempotent"
        )
        return VerificationProof(stopped, within, effect, 600 if stopped else 0, detail)
