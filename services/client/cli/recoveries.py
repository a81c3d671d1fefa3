"""``recovery candidate | submit | show``: the never-claimed failed-request recovery, and the
command group every recovery workflow registers: its three commands route by workflow through
the recovery-workflow registry (``shared.continuity.recovery``) and the client's generic calls.
A workflow adds only its texts and, if it has any, the inputs it reads from its own options.

``recovery-workflows`` prints what the services say about every workflow they route
(AdmissionService.ListRecoveryWorkflows)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from forge.continuity.v1 import admission_pb2, candidate_pb2, common_pb2
from services.client.cli._command import (
    EXIT_OK,
    Output,
    Subcommands,
    acknowledgement_help,
    add_command,
    add_group,
    flag,
)
from services.client.cli.render import (
    aligned,
    execution_state,
    handoff_lines,
    hold_lines,
    lease_bounds_text,
)
from services.client.client import ContinuityClient
from shared.continuity.recovery import workflow as recovery_workflow
from shared.contract.terms import MAX_WINDOW_SECONDS, enum_short_name

#: The inputs a workflow reads from its own options, for the candidate (False) or the
#: submission (True), by contract field name.
InputsOf = Callable[[argparse.Namespace, bool], dict[str, Any]]


def _no_inputs(args: argparse.Namespace, submitting: bool) -> dict[str, Any]:
    return {}


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
    workflow: str,
    inputs: InputsOf = _no_inputs,
) -> RecoveryCommands:
    """``GROUP candidate | submit | show`` of ``workflow`` with the arguments every recovery
    workflow takes: run and request, and for the submission the recovery ID, the reviewed
    candidate digest, the lease window and one flag per acknowledgement of ``workflow``.
    ``texts`` are for candidate, submit and show, in that order."""
    handlers = _handlers(workflow, inputs)
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
        help=f"requested lease in seconds, 1..{MAX_WINDOW_SECONDS}; the granted lease is the "
        "least of this, the policy window, the run's provider timeout and its remaining "
        "deadline (the answer's lease bounds say which won)",
    )
    for name in recovery_workflow(workflow).acknowledgements:
        submit.add_argument(flag(name), action="store_true", help=acknowledgement_help(name))
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
        "never_claimed",
    )
    add_command(
        commands,
        "recovery-workflows",
        "the recovery workflows the services route",
        _workflows,
    )


def _call_line(call: admission_pb2.RecoveryWorkflowCall) -> str:
    rpc = call.rpc.rsplit("/", 1)[-1]
    return f"{call.http_method} {call.path}  ({rpc})" if call.path else f"gRPC only ({rpc})"


def workflow_lines(reply: admission_pb2.ListRecoveryWorkflowsResponse) -> list[str]:
    """Each workflow: its identity, when it applies, its routes (relative to the saved ticket's
    route), the acknowledgements with their sentences, and its inputs."""
    lines = [f"routes relative to {reply.request_path}"]
    for described in reply.workflows:
        applies = described.applies
        when = "failed after a worker claim" if applies.failed_after_claim else "failed unclaimed"
        if applies.follows:
            when += f", after the {', '.join(applies.follows)} recovery"
        lines += [
            "",
            f"{described.name}: {described.title}",
            *aligned(
                [
                    ("applies", f"{when}. {applies.situation}".strip()),
                    ("action", described.action),
                    (
                        "roles",
                        ", ".join(
                            enum_short_name(common_pb2.Role, r).lower() for r in described.roles
                        ),
                    ),
                    ("policy switch", described.policy_switch or "-"),
                    ("candidate", _call_line(described.candidate)),
                    ("submit", _call_line(described.submit)),
                    ("read back", _call_line(described.read)),
                ],
                indent="  ",
            ),
            "  acknowledgements:",
            *[f"    --{a.field.replace('_', '-')}: {a.text}" for a in described.acknowledgements],
        ]
        if described.inputs:
            lines.append("  inputs:")
            lines += [
                f"    {i.field} ({i.message_type})"
                + (", also for the candidate" if i.candidate else "")
                for i in described.inputs
            ]
    return lines


def _workflows(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
    reply = client.recovery_workflows()
    output.emit(reply, workflow_lines(reply))
    return EXIT_OK


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


def outcome_lines(outcome: common_pb2.RecoveryOutcome, created: bool | None = None) -> list[str]:
    request = outcome.execution_request
    pairs: list[tuple[str, object]] = [
        ("run", outcome.run_id),
        ("request", outcome.request_id),
        ("recovery", outcome.recovery_id),
        ("actor", outcome.actor),
        ("execution request", request.execution_request_id),
        ("state", execution_state(request)),
        ("lease", f"generation {request.lease.generation}, {request.lease.seconds} s"),
        *(
            [("lease bounds", lease_bounds_text(outcome.lease_bounds))]
            if outcome.HasField("lease_bounds")
            else []
        ),
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


def _handlers(
    workflow: str, inputs: InputsOf
) -> tuple[
    Callable[[ContinuityClient, argparse.Namespace, Output], int],
    Callable[[ContinuityClient, argparse.Namespace, Output], int],
    Callable[[ContinuityClient, argparse.Namespace, Output], int],
]:
    """Candidate, submit and show of ``workflow``."""
    acknowledgements = recovery_workflow(workflow).acknowledgements

    def candidate(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
        found = client._recovery_candidate(
            workflow, args.run_id, args.request_id, **inputs(args, False)
        )
        output.emit(found, candidate_lines(found), field="candidate")
        return EXIT_OK

    def submit(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
        submitted = client._request_recovery(
            workflow,
            args.run_id,
            args.request_id,
            args.recovery_id,
            candidate_digest=args.candidate_digest,
            valid_for_seconds=args.valid_for_seconds,
            acknowledgements={name: bool(getattr(args, name)) for name in acknowledgements},
            **inputs(args, True),
        )
        output.emit(submitted, outcome_lines(submitted.outcome, submitted.created))
        return EXIT_OK

    def show(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
        outcome = client._recovery(workflow, args.run_id, args.request_id)
        output.emit(outcome, outcome_lines(outcome), field="outcome")
        return EXIT_OK

    return candidate, submit, show
