"""``reconcile inspect | verify | submit | show``: reconciliation of a claimed request whose owner
was lost.

``verify`` and ``submit`` take the ``reconciliation_digest`` that ``inspect`` showed: the command
reads the snapshot again and sends the decision with the reviewed digest, so a snapshot that moved
since the review is refused by the ledger (RECONCILIATION_DIGEST_STALE) and needs fresh review.
"""

from __future__ import annotations

import argparse
from typing import Any

from forge.continuity.v1 import reconciliation_pb2
from services.client.cli._command import EXIT_OK, Output, Subcommands, add_command, add_group
from services.client.cli.render import (
    aligned,
    execution_state,
    handoff_lines,
    hold_lines,
    lease_bounds_text,
)
from services.client.client import ContinuityClient
from services.client.reconciliation import DECISIONS
from shared.contract.terms import enum_short_name


def _short(enum: Any, number: int) -> str:
    """The value's short name as a person reads it (``mark_unresolved``, ``ceased``)."""
    return enum_short_name(enum, number).lower()


def register(commands: Subcommands) -> None:
    group = add_group(commands, "reconcile", "reconcile a claimed request whose owner was lost")
    inspect = add_command(
        group,
        "inspect",
        "show the snapshot, its holds and reconciliation digest (read-only)",
        _inspect,
    )
    verify = add_command(
        group,
        "verify",
        "ask the deployment verifier for a proof of the reviewed snapshot",
        _verify,
    )
    submit = add_command(
        group,
        "submit",
        "submit the reviewed decision once; keep RECONCILIATION_ID and use 'reconcile show' "
        "after a lost response",
        _submit,
    )
    show = add_command(group, "show", "show the saved decision of an execution request", _show)
    for command in (inspect, verify, submit, show):
        command.add_argument("run_id", metavar="RUN_ID")
        command.add_argument("execution_request_id", metavar="EXECUTION_REQUEST_ID")
    for command in (inspect, verify, submit):
        command.add_argument("reconciliation_id", metavar="RECONCILIATION_ID")
    for command in (verify, submit):
        command.add_argument(
            "--reconciliation-digest", required=True, help="the digest 'reconcile inspect' shows"
        )
        command.add_argument("--evidence-reference", required=True, help="at most 1024 characters")
    submit.add_argument("--decision", required=True, choices=sorted(DECISIONS))
    submit.add_argument(
        "--cessation-unproven-acknowledged",
        action="store_true",
        help="mark_unresolved only: release the claim although no recorded verification proves "
        "that its owner ceased (it may still run); the decision records it",
    )


def snapshot_lines(snapshot: reconciliation_pb2.ReconciliationSnapshot) -> list[str]:
    request = snapshot.execution_request
    lines = aligned(
        [
            ("run", snapshot.run_id),
            ("request", snapshot.request_id),
            ("attempt", snapshot.attempt_id),
            ("execution request", request.execution_request_id),
            ("state", execution_state(request)),
            ("lease generation", request.lease.generation),
            ("owner", request.owner or "-"),
            ("claims", ", ".join(f"g{c.lease_generation} {c.worker}" for c in snapshot.claims)),
            ("deliveries", len(snapshot.deliveries)),
            ("later native entries", len(snapshot.later_entries)),
            ("commands", f"{snapshot.commands.used} of {snapshot.commands.limit}"),
            ("reserved lease seconds", snapshot.time.reserved_lease_seconds),
            ("verifications", len(snapshot.verifications)),
            ("reconciliation_digest", snapshot.reconciliation_digest),
        ]
    )
    return lines + hold_lines(snapshot.holds) + handoff_lines(snapshot.handoff)


def verification_lines(verification: reconciliation_pb2.ReconciliationVerification) -> list[str]:
    return aligned(
        [
            ("verifier", verification.verifier),
            ("effect", _short(reconciliation_pb2.VerifiedEffect, verification.effect)),
            ("journal sequence", verification.journal_sequence),
            ("expires at", verification.expires_at.ToJsonString()),
            ("detail", verification.detail),
        ]
    )


def reconciliation_lines(
    saved: reconciliation_pb2.Reconciliation, created: bool | None = None
) -> list[str]:
    pairs: list[tuple[str, object]] = [
        ("run", saved.run_id),
        ("reconciliation", saved.reconciliation_id),
        ("decision", _short(reconciliation_pb2.ReconciliationDecision, saved.decision)),
        ("actor", saved.actor),
        ("reconciled request", saved.reconciled_request.execution_request_id),
        ("state", execution_state(saved.reconciled_request)),
        ("fenced generation", saved.fenced_lease_generation),
        ("settlement sequence", saved.settlement_sequence),
    ]
    if saved.HasField("retry_request"):
        pairs.append(("retry request", saved.retry_request.execution_request_id))
    if saved.HasField("lease_bounds"):
        pairs.append(("retry lease", lease_bounds_text(saved.lease_bounds)))
    if saved.cessation_unproven_acknowledged:
        pairs.append(("cessation", "unproven (acknowledged by the administrator)"))
    elif saved.verification_sequence:
        pairs.append(("cessation", f"verified (sequence {saved.verification_sequence})"))
    if created is not None:
        pairs.append(("created", "yes" if created else "no (identical repeat)"))
    return aligned(pairs) + handoff_lines(saved.handoff)


def _reviewed(
    client: ContinuityClient, args: argparse.Namespace
) -> reconciliation_pb2.ReconciliationSnapshot:
    """The snapshot as it is now, carrying the digest the reviewer saw (the ledger compares)."""
    snapshot = client.inspect_reconciliation(
        args.run_id, args.execution_request_id, args.reconciliation_id
    )
    snapshot.reconciliation_digest = args.reconciliation_digest
    return snapshot


def _inspect(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
    snapshot = client.inspect_reconciliation(
        args.run_id, args.execution_request_id, args.reconciliation_id
    )
    output.emit(snapshot, snapshot_lines(snapshot), field="snapshot")
    return EXIT_OK


def _verify(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
    verification = client.verify_reconciliation(_reviewed(client, args), args.evidence_reference)
    output.emit(verification, verification_lines(verification), field="verification")
    return EXIT_OK


def _submit(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
    submitted = client.reconcile_execution_request(
        _reviewed(client, args),
        decision=args.decision,
        evidence_reference=args.evidence_reference,
        cessation_unproven_acknowledged=args.cessation_unproven_acknowledged,
    )
    output.emit(submitted, reconciliation_lines(submitted.reconciliation, submitted.created))
    return EXIT_OK


def _show(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
    saved = client.reconciliation(args.run_id, args.execution_request_id)
    output.emit(saved, reconciliation_lines(saved), field="reconciliation")
    return EXIT_OK
