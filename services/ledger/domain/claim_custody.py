"""What a claim re-reads of the custody its request was admitted against (ADR 0045): the
ticket's own journal rows, and the run's source as every ``run_started`` records it. Pure rules
over entries the claim's one effects statement read; ``transactions/execution_rules.py``
applies them inside the claim.

- **The ticket and its settlement rows.** The admission wrote the ``migration_settlement`` and,
  adjacent to it, the ``ownership_claim`` the ticket row names by sequence. At the claim both are
  still there, intact (each entry's hash is its content's, the claim links to the settlement),
  and still say what the ticket says (request, execution request, attempt, candidate and derived
  checkpoint digests, policy revision, version). A request the admission itself queued (not a
  recovery's requeue or a reconciliation's retry) still carries the ticket's checkpoint and
  policy revision. Anything else is a ticket changed after admission: ``TICKET_CHANGED``.
- **The run's source.** Every ``run_started`` of the run records the run's task, attempt, source
  revision and configuration digest, as the candidate required before admission; one that
  records another (a row rewritten or inserted after admission, which the outstanding-ticket
  refusal and ``NATIVE_JOURNAL_CHANGED`` cannot see when it sits before the queueing entry)
  stops the claim: ``RUN_STARTED_SOURCE_CHANGED``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.journal import EntryKind, StoredEntry, payload_of
from services.ledger.domain.runs import Run
from services.ledger.domain.tickets import StoredTicket
from shared.continuity.journal_chain import entry_problem
from shared.runtime.errors import FailedPrecondition, PreconditionViolation

#: The run fields a ``run_started`` records, by payload key.
STARTED_FIELDS = ("task_id", "attempt_id", "source_revision", "configuration_digest")


#: An entry's parsed payload (the caller's, when it keeps the entries it read parsed).
Parse = Callable[[StoredEntry], Any]


def _payload(entry: StoredEntry, parse: Parse) -> dict[str, Any]:
    try:
        payload = parse(entry)
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def _mismatches(
    subject: str, payload: Mapping[str, Any], expected: Mapping[str, object]
) -> list[PreconditionViolation]:
    return [
        PreconditionViolation(
            "TICKET", f"{subject}.{key}", f"expected {value!r}, found {payload.get(key)!r}"
        )
        for key, value in expected.items()
        if payload.get(key) != value
    ]


def _row(
    subject: str, entry: StoredEntry | None, kind: EntryKind, prev_hash: str | None, parse: Parse
) -> tuple[dict[str, Any] | None, list[PreconditionViolation]]:
    """The payload of an intact ticket row of ``kind``, or why it is not one."""
    if entry is None or entry.kind != kind.value:
        found = "nothing" if entry is None else f"a {entry.kind}"
        return None, [PreconditionViolation("TICKET", subject, f"expected {kind.value}, {found}")]
    problem, _ = entry_problem(
        entry, entry.sequence, entry.prev_hash if prev_hash is None else prev_hash
    )
    if problem:
        return None, [PreconditionViolation("TICKET", subject, f"the entry fails: {problem}")]
    return _payload(entry, parse), []


def ticket_violations(
    ticket: StoredTicket,
    record: ExecutionRequestRecord,
    run: Run,
    entries: Iterable[StoredEntry],
    queued_at: int,
    parse: Parse = payload_of,
) -> list[PreconditionViolation]:
    """Every way the ticket's rows no longer are what ``record`` was admitted against (empty:
    unchanged). ``entries`` must hold the run's entries at the ticket's two sequences, of any
    kind the claim reads; ``queued_at`` is the sequence of the entry that queued ``record``."""
    by_sequence = {entry.sequence: entry for entry in entries}
    settlement_entry = by_sequence.get(ticket.settlement_sequence)
    settlement, violations = _row(
        "settlement", settlement_entry, EntryKind.MIGRATION_SETTLEMENT, None, parse
    )
    if settlement is not None:
        violations += _mismatches(
            "settlement",
            settlement,
            {
                "request_id": ticket.request_id,
                "version": ticket.version,
                "candidate_digest": ticket.digests.get("candidate_digest"),
                "derived_checkpoint_digest": ticket.derived_checkpoint_digest,
                "policy_revision": ticket.policy_revision,
            },
        )
    claim, found = _row(
        "ownership_claim",
        by_sequence.get(ticket.claim_sequence),
        EntryKind.OWNERSHIP_CLAIM,
        settlement_entry.hash if settlement_entry is not None else "",
        parse,
    )
    violations += found
    if claim is not None:
        violations += _mismatches(
            "ownership_claim",
            claim,
            {
                "request_id": ticket.request_id,
                "execution_request_id": ticket.execution_request_id,
                "attempt_id": run.spec.attempt_id,
            },
        )
    if queued_at == ticket.claim_sequence:
        # queued by the admission itself: the request row is still the ticket's
        violations += [
            PreconditionViolation(
                "TICKET", f"execution_request.{name}", f"expected {expected!r}, found {actual!r}"
            )
            for name, expected, actual in (
                ("execution_request_id", ticket.execution_request_id, record.execution_request_id),
                ("checkpoint_digest", ticket.derived_checkpoint_digest, record.checkpoint_digest),
                ("policy_revision", ticket.policy_revision, record.policy_revision),
            )
            if expected != actual
        ]
    return violations


def check_ticket_unchanged(
    ticket: StoredTicket,
    record: ExecutionRequestRecord,
    run: Run,
    entries: Iterable[StoredEntry],
    queued_at: int,
    parse: Parse = payload_of,
) -> None:
    """TICKET_CHANGED, naming every difference, unless :func:`ticket_violations` finds none."""
    violations = ticket_violations(ticket, record, run, entries, queued_at, parse)
    if violations:
        raise FailedPrecondition(
            "TICKET_CHANGED",
            f"the ticket of request {ticket.request_id} or its settlement rows changed after "
            f"admission ({violations[0].subject}: {violations[0].description}); execution "
            "stops: cancel the request and judge the run again",
            metadata={
                "execution_request_id": record.execution_request_id,
                "request_id": ticket.request_id,
                "changed": ",".join(v.subject for v in violations),
            },
            precondition_violations=violations,
        )


def check_run_started_source(
    run: Run, starts: Iterable[StoredEntry], execution_request_id: str, parse: Parse = payload_of
) -> None:
    """RUN_STARTED_SOURCE_CHANGED when a ``run_started`` of the run records another task,
    attempt, source revision or configuration digest than the run's (absent counts as another,
    as it does for the candidate)."""
    expected = {name: getattr(run.spec, name) for name in STARTED_FIELDS}
    for entry in starts:
        payload = _payload(entry, parse)
        changed = [name for name, value in expected.items() if payload.get(name) != value]
        if changed:
            raise FailedPrecondition(
                "RUN_STARTED_SOURCE_CHANGED",
                f"run_started at sequence {entry.sequence} records another "
                f"{', '.join(changed)} than the run's; a changed source stops execution",
                metadata={
                    "execution_request_id": execution_request_id,
                    "sequence": str(entry.sequence),
                    "changed": ",".join(changed),
                },
                precondition_violations=[
                    PreconditionViolation(
                        "SOURCE",
                        name,
                        f"expected {expected[name]!r}, run_started records {payload.get(name)!r}",
                    )
                    for name in changed
                ],
            )
