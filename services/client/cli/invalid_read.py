"""``candidate show`` and ``request submit | show``: the invalid-read continuity flow."""

from __future__ import annotations

import argparse

from forge.continuity.v1 import common_pb2
from services.client._validation import ORIGIN
from services.client.cli._command import (
    EXIT_OK,
    Output,
    Subcommands,
    UsageError,
    acknowledgement_help,
    add_command,
    add_group,
)
from services.client.cli.render import candidate_lines, ticket_lines
from services.client.client import ContinuityClient, validate_continuity_request
from shared.contract.terms import (
    DEFAULT_VERSION,
    DIGEST_NAMES,
    MAX_WINDOW_SECONDS,
    SUPPORTED_VERSIONS,
    VERSIONS,
)
from shared.runtime.errors import Conflict, FailedPrecondition, NotFound, PreconditionViolation

#: Every acknowledgement of any version, in the contract's order, with the versions taking it.
_ACKNOWLEDGEMENTS = {
    name: tuple(
        number for number in SUPPORTED_VERSIONS if name in VERSIONS[number].acknowledgements
    )
    for number in SUPPORTED_VERSIONS
    for name in VERSIONS[number].acknowledgements
}
#: What each acknowledgement of the continuity request asserts (the contract's field comments, in
#: the operator's words); a recovery workflow's come from its descriptor's wording instead.
_ACKNOWLEDGEMENT_TEXT = {
    "acknowledge_no_new_grant": "the continuation gets no new tool grant",
    "acknowledge_original_consumption": "the original model and tool consumption stays charged",
    "acknowledge_renewed_same_attempt_lease": "only the same attempt's lease is renewed",
    "acknowledge_unavailable_source_observations": "the unavailable source observations stay "
    "unknown",
}
_VERSIONS_HELP = (
    " or ".join(str(number) for number in SUPPORTED_VERSIONS) + f" (default {DEFAULT_VERSION})"
)
_DIGEST_HELP = {
    "candidate_digest": "the candidate_digest shown by 'candidate show'; with --from-candidate "
    "the one you reviewed: the current candidate is read and, when its candidate_digest "
    "differs, the submission is refused here and nothing is sent",
}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def register(commands: Subcommands) -> None:
    candidate = add_group(commands, "candidate", "read a held run's continuity candidate")
    show = add_command(
        candidate,
        "show",
        "show the candidate: proof, qualification, digests, holds and handoff",
        _candidate_show,
    )
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--version", type=int, default=DEFAULT_VERSION, help=_VERSIONS_HELP)

    request = add_group(commands, "request", "submit or read a continuity request")
    submit = add_command(
        request,
        "submit",
        "submit a continuity request (execution operator); keep REQUEST_ID and use "
        "'request show' after a lost response",
        _request_submit,
    )
    submit.add_argument("run_id", metavar="RUN_ID")
    submit.add_argument("request_id", metavar="REQUEST_ID")
    submit.add_argument(
        "--valid-for-seconds",
        type=int,
        required=True,
        help=f"requested lease in seconds, 1..{MAX_WINDOW_SECONDS}; the granted lease is the "
        "least of this, the policy window, the run's provider timeout and its remaining "
        "deadline (the answer's lease bounds say which won)",
    )
    submit.add_argument("--version", type=int, default=DEFAULT_VERSION, help=_VERSIONS_HELP)
    for name, versions in _ACKNOWLEDGEMENTS.items():
        if versions == SUPPORTED_VERSIONS:
            submit.add_argument(
                _flag(name),
                action="store_true",
                help=acknowledgement_help(_ACKNOWLEDGEMENT_TEXT[name]),
            )
        else:
            # Unset (None) unless given, so a version that does not take it can tell.
            only = " and ".join(str(number) for number in versions)
            submit.add_argument(
                _flag(name),
                action="store_true",
                default=None,
                help=acknowledgement_help(
                    _ACKNOWLEDGEMENT_TEXT[name], f" with --version {only}, refused otherwise"
                ),
            )
    submit.add_argument(
        "--from-candidate",
        action="store_true",
        help="read the candidate and submit its exact digests, only when its candidate_digest "
        "is the --candidate-digest you reviewed (required with this flag; a different one is "
        "refused here and nothing is sent); when REQUEST_ID already has a ticket admitted from "
        "that candidate_digest, resend the digests it was admitted with, so a retry after a "
        "lost response is the identical request",
    )
    for name in DIGEST_NAMES:
        submit.add_argument(
            _flag(name),
            dest=name,
            metavar="DIGEST",
            help=_DIGEST_HELP.get(name, "copied from 'candidate show' (not with --from-candidate)"),
        )
    show_request = add_command(
        request, "show", "read the saved outcome of a request", _request_show
    )
    show_request.add_argument("run_id", metavar="RUN_ID")
    show_request.add_argument("request_id", metavar="REQUEST_ID")


def _candidate_show(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    candidate = client.invalid_read_continuity_candidate(args.run_id, args.version)
    out.emit(candidate, candidate_lines(candidate), field="candidate")
    return EXIT_OK


def _request_submit(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    acknowledgements = {name: getattr(args, name) for name in _ACKNOWLEDGEMENTS}
    # Refuse locally before anything (even the candidate read) goes over the wire.
    validate_continuity_request(
        args.run_id,
        args.request_id,
        version=args.version,
        valid_for_seconds=args.valid_for_seconds,
        **acknowledgements,
    )
    digests = _submission_digests(client, args)
    response = client.request_invalid_read_continuity(
        args.run_id,
        args.request_id,
        digests=digests,
        version=args.version,
        valid_for_seconds=args.valid_for_seconds,
        **acknowledgements,
    )
    out.emit(response, ticket_lines(response.ticket, response.created))
    return EXIT_OK


def _request_show(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    ticket = client.invalid_read_continuity(args.run_id, args.request_id)
    out.emit(ticket, ticket_lines(ticket), field="ticket")
    return EXIT_OK


# --- which digests a submission carries --------------------------------------------------------


def _submission_digests(
    client: ContinuityClient, args: argparse.Namespace
) -> common_pb2.ContinuityDigests:
    given = {name: getattr(args, name) for name in DIGEST_NAMES if getattr(args, name)}
    if args.from_candidate:
        read = [name for name in given if name != "candidate_digest"]
        if read:
            raise UsageError(
                "request submit: --from-candidate reads these digests; do not also pass "
                + ", ".join(_flag(name) for name in read)
            )
        if "candidate_digest" not in given:
            raise UsageError(
                "request submit: --from-candidate needs --candidate-digest, the candidate_digest "
                "of the candidate you reviewed ('candidate show')"
            )
        return _reviewed_digests(client, args, given["candidate_digest"])
    missing = [name for name in DIGEST_NAMES if name not in given]
    if missing:
        raise UsageError(
            "request submit: pass --from-candidate with --candidate-digest, or all four digests; "
            "missing " + ", ".join(_flag(name) for name in missing)
        )
    return common_pb2.ContinuityDigests(**given)


def _reviewed_digests(
    client: ContinuityClient, args: argparse.Namespace, reviewed: str
) -> common_pb2.ContinuityDigests:
    """The digests to submit for ``--from-candidate``, only when they belong to the candidate
    the operator reviewed: a submission must carry what the operator saw, never whatever the
    candidate has become since."""
    # A retry after a lost response must resend what was admitted: once admitted, the
    # candidate has moved on, so a saved ticket's digests are the ones this request carried.
    try:
        admitted = client.invalid_read_continuity(args.run_id, args.request_id).digests
    except NotFound as absent:
        if absent.reason != "ADMISSION_NOT_FOUND":
            raise
    else:
        if admitted.candidate_digest != reviewed:
            raise Conflict(
                "REQUEST_ID_CONFLICT",
                f"request {args.request_id} was already admitted from candidate "
                f"{admitted.candidate_digest}, not the reviewed {reviewed}; nothing was submitted",
                metadata={
                    **ORIGIN,
                    "request_id": args.request_id,
                    "admitted_candidate_digest": admitted.candidate_digest,
                    "reviewed_candidate_digest": reviewed,
                },
            )
        return admitted
    current = client.invalid_read_continuity_candidate(args.run_id, args.version).digests
    if current.candidate_digest != reviewed:
        raise FailedPrecondition(
            "CANDIDATE_DIGEST_STALE",
            "the candidate changed since it was reviewed: candidate_digest; read it again with "
            "'candidate show', review it, and submit its candidate_digest; nothing was submitted",
            metadata={**ORIGIN, "stale": "candidate_digest"},
            precondition_violations=[
                PreconditionViolation(
                    "DIGEST",
                    "candidate_digest",
                    f"reviewed {reviewed}, current {current.candidate_digest}",
                )
            ],
        )
    return current
