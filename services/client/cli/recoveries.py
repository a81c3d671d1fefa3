"""``recovery candidate | submit | show``: the never-claimed failed-request recovery, and the
command group every recovery workflow registers: its three commands route by workflow through
the recovery-workflow registry (``shared.continuity.recovery``) and the client's generic calls.
A workflow adds only its texts and, if it has any, the inputs it reads from its own options.

``recovery-workflows`` prints what the services say about every workflow they route
(AdmissionService.ListRecoveryWorkflows)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, replace

from forge.continuity.v1 import admission_pb2, candidate_pb2, common_pb2
from services.client.cli._command import (
    EXIT_OK,
    Output,
    Subcommands,
    UsageError,
    acknowledgement_help,
    add_command,
    add_group,
    flag,
    output_file,
)
from services.client.cli.render import (
    aligned,
    execution_state,
    handoff_lines,
    hold_lines,
    lease_bounds_text,
)
from services.client.client import ContinuityClient
from services.client.recoveries import CANDIDATE
from shared.continuity.recovery import workflow as recovery_workflow
from shared.contract import review_document
from shared.contract.recovery_proto import message_classes
from shared.contract.terms import MAX_WINDOW_SECONDS, enum_short_name


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
) -> RecoveryCommands:
    """``GROUP candidate | submit | show`` of ``workflow`` with the arguments every recovery
    workflow takes: run and request, and for the submission the recovery ID, the reviewed
    candidate digest, the lease window and one flag per acknowledgement of ``workflow``.
    A workflow with typed inputs reads them from ``--review FILE``, the administrator's review
    document (``forge.continuity.review/1``, the console's shape too), which may also carry
    the reviewed candidate digest and acknowledgements.
    ``texts`` are for candidate, submit and show, in that order."""
    described = recovery_workflow(workflow)
    reviewed = bool(review_document.input_fields(described))
    handlers = _handlers(workflow, reviewed)
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
        "--candidate-digest",
        required=not reviewed,
        help=f"the candidate_digest '{group} candidate' shows"
        + (" (default: the review document's candidate_digest)" if reviewed else ""),
    )
    submit.add_argument(
        "--valid-for-seconds",
        type=int,
        required=True,
        help=f"requested lease in seconds, 1..{MAX_WINDOW_SECONDS}; the granted lease is the "
        "least of this, the policy window, the run's provider timeout and its remaining "
        "deadline (the answer's lease bounds say which won)",
    )
    # what each flag acknowledges is the descriptor's wording, the console's words too
    worded = dict(described.wording.acknowledgements)
    for name in described.acknowledgements:
        sentence = worded.get(name, name.removeprefix("acknowledge_").replace("_", " "))
        submit.add_argument(
            flag(name),
            action="store_true",
            help=acknowledgement_help(sentence, " unless the review document gives it")
            if reviewed
            else acknowledgement_help(sentence),
        )
    if reviewed:
        inputs = ", ".join(review_document.input_fields(described))
        for command in (candidate, submit):
            command.add_argument(
                "--review",
                required=True,
                metavar="FILE",
                help=f"the review document ({review_document.FORMAT}: {inputs}; docs/formats.md)",
            )
        candidate.add_argument(
            "--write-review",
            metavar="OUT",
            help="write the review document again with the candidate_digest shown, for "
            "'submit --review' or the console",
        )
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


def _review(
    args: argparse.Namespace, workflow: str, reviewed: bool
) -> review_document.ReviewDocument | None:
    """The ``--review`` document of a workflow with typed inputs, checked against the command."""
    if not reviewed:
        return None
    try:
        return review_document.load(args.review, workflow, args.run_id, args.request_id)
    except review_document.ReviewDocumentError as error:
        raise UsageError(f"--review {args.review}: {error}") from error


def _candidate_digest(
    args: argparse.Namespace, review: review_document.ReviewDocument | None
) -> str:
    """The digest given, or the review document's; both given must agree."""
    given, reviewed = args.candidate_digest or "", review.candidate_digest if review else ""
    if given and reviewed and given != reviewed:
        raise UsageError(
            f"--candidate-digest {given} is not the review document's candidate_digest {reviewed}"
        )
    if not (given or reviewed):
        raise UsageError(
            "--candidate-digest is required: the review document has no candidate_digest "
            "(write one with 'candidate --write-review')"
        )
    return given or reviewed


def _handlers(
    workflow: str, reviewed: bool
) -> tuple[
    Callable[[ContinuityClient, argparse.Namespace, Output], int],
    Callable[[ContinuityClient, argparse.Namespace, Output], int],
    Callable[[ContinuityClient, argparse.Namespace, Output], int],
]:
    """Candidate, submit and show of ``workflow``."""
    described = recovery_workflow(workflow)
    input_fields = review_document.input_fields(described)
    candidate_fields = message_classes(CANDIDATE, described.rpcs.candidate)[0].DESCRIPTOR

    def candidate(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
        review = _review(args, workflow, reviewed)
        inputs = {
            name: message
            for name, message in (review.inputs if review else {}).items()
            if name in candidate_fields.fields_by_name
        }
        found = client._recovery_candidate(workflow, args.run_id, args.request_id, **inputs)
        if review is not None and args.write_review:
            # Acknowledgements given for another candidate are not carried to this one.
            kept = review.candidate_digest == found.candidate_digest
            written = replace(
                review,
                candidate_digest=found.candidate_digest,
                acknowledgements=review.acknowledgements if kept else frozenset(),
            )
            output_file(args.write_review).write_text(
                review_document.write(written), encoding="utf-8"
            )
        output.emit(found, candidate_lines(found), field="candidate")
        return EXIT_OK

    def submit(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
        review = _review(args, workflow, reviewed)
        missing = [name for name in input_fields if review and name not in review.inputs]
        if missing:
            raise UsageError(
                f"--review {args.review}: the review document has no inputs."
                f"{', inputs.'.join(missing)}; the submission needs it"
            )
        given = review.acknowledgements if review else frozenset()
        submitted = client._request_recovery(
            workflow,
            args.run_id,
            args.request_id,
            args.recovery_id,
            candidate_digest=_candidate_digest(args, review),
            valid_for_seconds=args.valid_for_seconds,
            acknowledgements={
                name: bool(getattr(args, name)) or name in given
                for name in described.acknowledgements
            },
            **(review.inputs if review else {}),
        )
        output.emit(submitted, outcome_lines(submitted.outcome, submitted.created))
        return EXIT_OK

    def show(client: ContinuityClient, args: argparse.Namespace, output: Output) -> int:
        outcome = client._recovery(workflow, args.run_id, args.request_id)
        output.emit(outcome, outcome_lines(outcome), field="outcome")
        return EXIT_OK

    return candidate, submit, show
