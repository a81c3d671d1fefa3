"""``recovery candidate | submit | show``: the never-claimed failed-request recovery."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from forge.continuity.v1 import admission_pb2, candidate_pb2, common_pb2
from services.client.cli._command import (
    EXIT_OK,
    Handler,
    Output,
    Subcommands,
    add_command,
    add_group,
)
from services.client.cli.render import aligned, handoff_lines, hold_lines
from services.client.client import ContinuityClient
from shared.contract.terms import MAX_WINDOW_SECONDS, RECOVERY_ACKNOWLEDGEMENTS

_ACKNOWLEDGEMENTS = RECOVERY_ACKNOWLEDGEMENTS["never_claimed"]


@dataclass(frozen=True)
class RecoveryCommands:
    """The three commands of one recovery workflow's group."""

    candidate: argparse.ArgumentParser
    submit: argparse.ArgumentParser
    show: argparse.ArgumentParser


def register_recovery_group(
    commands: Subcommands,
    group: str,
    help_text: str,
    texts: tuple[str, str, str],
    handlers: tuple[Handler, Handler, Handler],
    workflow: str,
) -> RecoveryCommands:
    """``GROUP candidate | submit | show`` with the arguments every recovery workflow takes:
    run and request, and for the submission the recovery ID, the reviewed candidate digest, the
    lease window and one flag per acknowledgement of ``workflow``. ``texts`` and ``handlers`` are
    for candidate, submit and show, in that order."""
    parent = add_group(commands, group, help_text)
    candidate, submit, show = (
        add_command(parent, name, text, handler)
        for name, text, handler in zip(
            ("candidate", "submit", "show"), texts, handlers, strict=True
        )
    )
    for command in (candidate, submit, show):
        command.add_argument("run_id", metavar="RUN_ID")
        command.add_argument("request_id", metavar="REQUEST_ID")
    submit.add_argument("recovery_id", metavar="RECOVERY_ID")
    submit.add_argument(
        "--candidate-digest", required=True, help=f"the candidate_digest '{group} candidate' shows"
    )
    submit.add_argument(
        "--valid-for-seconds",
        type=int,
        required=True,
        help=f"requested lease window, 1..{MAX_WINDOW_SECONDS}",
    )
    for name in RECOVERY_ACKNOWLEDGEMENTS[workflow]:
        submit.add_argument("--" + name.replace("_", "-"), action="store_true")
    return RecoveryCommands(candidate, submit, show)


def register(commands: Subcommands) -> None:
    register_recovery_group(
        commands,
        "recovery",
        "recover a request that failed unclaimed",
        (
            "show the recovery candidate: eligibility, digest, holds and handoff (read-only)",
            "submit the recovery once; keep RECOVERY_ID and use 'recovery show' after a lost "
            "response",
            "show the saved recovery of a request",
        ),
        (_candidate, _submit, _show),
        "never_claimed",
    )


def candidate_lines(candidate: candidate_pb2.RecoveryCandidate) -> list[str]:
    lines = aligned(
        [
            ("run", candidate.run_id),
            ("request", candidate.request_id),
            ("eligible", "yes" if candidate.eligible else "no"),
            ("candidate_digest", candidate.candidate_digest),
            ("policy revision", candidate.policy_revision),
            ("journal head", candidate.journal_head.sequence),
        ]
    )
    return lines + hold_lines(candidate.holds) + handoff_lines(candidate.handoff)


def outcome_lines(outcome: admission_pb2.RecoveryOutcome, created: bool | None = None) -> list[str]:
    request = outcome.execution_request
    pairs: list[tuple[str, object]] = [
        ("run", outcome.run_id),
        ("request", outcome.request_id),
        ("recovery", outcome.recovery_id),
        ("actor", outcome.actor),
        ("execution request", request.execution_request_id),
        ("state", common_pb2.ExecutionRequestState.Name(request.state)),
        ("lease", f"generation {request.lease.generation}, {request.lease.seconds} s"),
        ("witness sequence", outcome.witness_sequence),
        ("event sequence", outcome.event_sequence),
    ]
    if outcome.settlement_sequence:
        pairs.append(("settlement sequence", outcome.settlement_sequence))
    if outcome.derived_checkpoint_digest:
        pairs.append(("derived checkpoint", outcome.derived_checkpoint_digest))
    if created is not None:
        pairs.append(("created", "yes" if created else "no (identical repeat)"))
    return aligned(pairs)


def _candidate(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
    candidate = client.invalid_read_recovery_candidate(args.run_id, args.request_id)
    output.emit(candidate, candidate_lines(candidate))
    return EXIT_OK


def _submit(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
    submitted = client.request_invalid_read_recovery(
        args.run_id,
        args.request_id,
        args.recovery_id,
        candidate_digest=args.candidate_digest,
        valid_for_seconds=args.valid_for_seconds,
        **{name: bool(getattr(args, name)) for name in _ACKNOWLEDGEMENTS},
    )
    output.emit(submitted, outcome_lines(submitted.outcome, submitted.created))
    return EXIT_OK


def _show(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
    outcome = client.invalid_read_recovery(args.run_id, args.request_id)
    output.emit(outcome, outcome_lines(outcome))
    return EXIT_OK
