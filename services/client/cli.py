"""`python -m services.client`: the operator CLI of invalid-read continuity.

Examples (against `make run`, which prints the local development tokens)::

    export FORGE_TOKEN=dev-admin-token
    python -m services.client policy show
    python -m services.client policy set --expected-revision 1 --enable --window-seconds 3600
    python -m services.client --token dev-operator-token candidate show run-1
    python -m services.client --token dev-operator-token request submit run-1 req-1 \\
        --from-candidate --valid-for-seconds 1800 --acknowledge-no-new-grant \\
        --acknowledge-original-consumption --acknowledge-renewed-same-attempt-lease
    python -m services.client request show run-1 req-1
    python -m services.client journal show run-1
    python -m services.client --json journal verify run-1

Exit status: 0 on success; 1 when a service (or the client's own validation) refuses, or when
``journal verify`` finds a broken chain; 2 for usage errors. Refusals print
``error: CODE REASON: message`` and their details on stderr (a JSON object with ``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, TextIO

from google.protobuf import json_format, timestamp_pb2
from google.protobuf.message import Message

from forge.continuity.v1 import candidate_pb2, common_pb2, ledger_pb2
from services.client.client import (
    DIGEST_NAMES,
    MAX_VALID_FOR_SECONDS,
    TOKEN_VARIABLE,
    ContinuityClient,
    default_target,
    validate_continuity_request,
)
from shared.errors import DomainError, NotFound

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
SHORT_HASH = len("sha256:") + 12


class UsageError(Exception):
    """A command line the parser refuses (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


# --- rendering ---------------------------------------------------------------------------------


def to_json_object(message: Message) -> dict[str, Any]:
    """Protobuf → JSON object: proto field names, every field including its default."""
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def _enum(enum: Any, value: int, prefix: str) -> str:
    name: str = enum.Name(value)
    return name.removeprefix(prefix)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _time(message: Message, field: str) -> str:
    if not message.HasField(field):
        return "-"
    stamp: timestamp_pb2.Timestamp = getattr(message, field)
    return stamp.ToJsonString()


def short_hash(value: str) -> str:
    return value[:SHORT_HASH] if value else "-"


def aligned(pairs: Sequence[tuple[str, object]], indent: str = "") -> list[str]:
    """``key: value`` lines with the values in one column (continuation lines too)."""
    if not pairs:
        return []
    width = max(len(key) for key, _ in pairs) + 1
    continuation = "\n" + " " * (len(indent) + width + 1)
    return [
        f"{indent}{key + ':':<{width}} " + continuation.join(str(value).splitlines() or [""])
        for key, value in pairs
    ]


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Left-aligned columns (numbers right-aligned), two spaces apart."""
    cells = [list(header), *[[str(cell) for cell in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    numeric = [
        bool(rows) and all(str(row[i]).isdigit() for row in rows) for i in range(len(header))
    ]
    return [
        "  ".join(
            cell.rjust(widths[i]) if numeric[i] else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ).rstrip()
        for row in cells
    ]


def policy_lines(policy: common_pb2.Policy) -> list[str]:
    return aligned(
        [
            ("revision", policy.revision),
            ("enabled", _bool(policy.enabled)),
            ("window_seconds", policy.window_seconds),
            ("per_run_ticket_limit", policy.per_run_ticket_limit),
            ("pending_ticket_limit", policy.pending_ticket_limit),
            (
                "allow_unavailable_source_observations",
                _bool(policy.allow_unavailable_source_observations),
            ),
            ("allow_pre_admission_recovery", _bool(policy.allow_pre_admission_recovery)),
            (
                "allow_readonly_observation_recovery",
                _bool(policy.allow_readonly_observation_recovery),
            ),
            ("updated_by", policy.updated_by),
            ("updated_at", _time(policy, "updated_at")),
            ("digest", policy.digest),
        ]
    )


def policy_history_lines(policies: Sequence[common_pb2.Policy]) -> list[str]:
    def allowed(policy: common_pb2.Policy) -> str:
        names = [
            name
            for name, on in (
                ("unavailable_source_observations", policy.allow_unavailable_source_observations),
                ("pre_admission_recovery", policy.allow_pre_admission_recovery),
                ("readonly_observation_recovery", policy.allow_readonly_observation_recovery),
            )
            if on
        ]
        return ",".join(names) or "-"

    return table(
        (
            "REVISION",
            "ENABLED",
            "WINDOW",
            "PER_RUN",
            "PENDING",
            "ALLOWS",
            "UPDATED_BY",
            "UPDATED_AT",
        ),
        [
            (
                p.revision,
                _bool(p.enabled),
                p.window_seconds,
                p.per_run_ticket_limit,
                p.pending_ticket_limit,
                allowed(p),
                p.updated_by,
                _time(p, "updated_at"),
            )
            for p in policies
        ],
    )


def _digest_pairs(digests: common_pb2.ContinuityDigests) -> list[tuple[str, object]]:
    return [(name, getattr(digests, name) or "-") for name in DIGEST_NAMES]


def hold_lines(holds: Sequence[common_pb2.Hold]) -> list[str]:
    if not holds:
        return ["holds: none"]
    lines = [f"holds: {len(holds)}"]
    for hold in holds:
        reason = _enum(common_pb2.HoldReason, hold.reason, "HOLD_REASON_")
        requirement = _enum(common_pb2.HoldRequirement, hold.requirement, "HOLD_REQUIREMENT_")
        subject = f" [{hold.subject}]" if hold.subject else ""
        lines.append(f"  - {reason}{subject}: requires {requirement}")
        if hold.detail:
            lines.append(f"      {hold.detail}")
    return lines


def handoff_lines(handoff: common_pb2.HandoffPayload) -> list[str]:
    lines = ["handoff:"]
    lines.append("  known effects:" + ("" if handoff.known_effects else " none"))
    lines += [
        f"    #{effect.journal_sequence} {effect.description}" for effect in handoff.known_effects
    ]
    unresolved = handoff.unresolved_alternatives
    lines.append("  unresolved alternatives:" + ("" if unresolved else " none"))
    lines += [f"    {item.subject}: {' | '.join(item.alternatives)}" for item in unresolved]
    obligations = handoff.remaining_obligations
    lines.append("  remaining obligations:" + ("" if obligations else " none"))
    lines += [
        f"    {item.description}" + (f" (blocked by {item.blocked_by})" if item.blocked_by else "")
        for item in obligations
    ]
    actions = handoff.permitted_next_actions
    lines.append("  permitted next actions:" + ("" if actions else " none"))
    lines += [f"    {item.action}: {item.description}" for item in actions]
    consumed = handoff.consumed_resources
    lines.append("  consumed resources:")
    deadline = consumed.deadline_remaining_seconds
    lines += aligned(
        [
            ("model_responses_consumed", consumed.model_responses_consumed),
            ("tool_calls", consumed.tool_calls),
            ("commands", f"{consumed.commands_used} of {consumed.command_limit}"),
            ("deadline_remaining_seconds", "none" if deadline < 0 else deadline),
        ],
        indent="    ",
    )
    return lines


def candidate_lines(candidate: candidate_pb2.InvalidReadContinuityCandidate) -> list[str]:
    proof = candidate.proof
    qualification = candidate.qualification
    pairs: list[tuple[str, object]] = [
        ("run_id", candidate.run_id),
        ("attempt_id", candidate.attempt_id),
        ("eligible", _bool(candidate.eligible)),
        ("version", candidate.version),
        ("policy_revision", candidate.policy_revision),
        ("journal_head", f"{candidate.journal_head.sequence} {candidate.journal_head.hash}"),
        ("source_digest", candidate.source_digest or "-"),
        ("custody_digest", candidate.custody_digest or "-"),
        (
            "qualification",
            f"{qualification.source_profile or '-'} "
            f"({'qualified' if qualification.qualified else 'not qualified'})",
        ),
        *_digest_pairs(candidate.digests),
        ("proof.call_id", proof.call_id or "-"),
        ("proof.query_json", proof.query_json or "-"),
        ("proof.accepted_by_advertised_schema", _bool(proof.accepted_by_advertised_schema)),
        ("proof.rejected_by_pinned_validator", _bool(proof.rejected_by_pinned_validator)),
        ("proof.validator_error", proof.validator_error or "-"),
        ("proof.checkpoint_digest", proof.checkpoint_digest or "-"),
        ("proof.consumed_response_digest", proof.consumed_response_digest or "-"),
        ("proof.consume_sequence", proof.consume_sequence),
        ("proof.runtime_identity", proof.runtime_identity or "-"),
        ("proof.validator_identity", proof.validator_identity or "-"),
        ("proof.derived_checkpoint_digest", proof.derived_checkpoint_digest or "-"),
        ("proof.witness_digest", proof.witness_digest or "-"),
    ]
    return [*aligned(pairs), *hold_lines(candidate.holds), *handoff_lines(candidate.handoff)]


def ticket_lines(ticket: ledger_pb2.AdmissionTicket, created: bool | None = None) -> list[str]:
    execution = ticket.execution_request
    lease = execution.lease
    pairs: list[tuple[str, object]] = []
    if created is not None:
        pairs.append(
            ("created", "true" if created else "false (identical repeat: the stored ticket)")
        )
    pairs += [
        ("run_id", ticket.run_id),
        ("request_id", ticket.request_id),
        ("operator_identity", ticket.operator_identity),
        ("version", ticket.version),
        ("policy_revision", ticket.policy_revision),
        ("settlement_sequence", ticket.settlement_sequence),
        ("claim_sequence", ticket.claim_sequence),
        ("derived_checkpoint_digest", ticket.derived_checkpoint_digest),
        ("request_content_digest", ticket.request_content_digest),
        ("created_at", _time(ticket, "created_at")),
        *_digest_pairs(ticket.digests),
        ("execution_request_id", execution.execution_request_id),
        (
            "execution_state",
            _enum(common_pb2.ExecutionRequestState, execution.state, "EXECUTION_REQUEST_STATE_"),
        ),
        ("attempt_id", execution.attempt_id),
        ("checkpoint_digest", execution.checkpoint_digest),
        ("lease_seconds", lease.seconds),
        ("lease_generation", lease.generation),
        ("lease_expires_at", _time(lease, "expires_at")),
        ("owner", execution.owner or "-"),
    ]
    return aligned(pairs)


def journal_lines(entries: Sequence[common_pb2.JournalEntry]) -> list[str]:
    if not entries:
        return ["no journal entries"]
    return table(
        ("SEQ", "KIND", "ACTOR", "HASH"),
        [
            (
                entry.sequence,
                _enum(common_pb2.JournalEntryKind, entry.kind, "JOURNAL_ENTRY_KIND_"),
                entry.actor,
                short_hash(entry.hash),
            )
            for entry in entries
        ],
    )


def verification_lines(result: ledger_pb2.VerifyJournalResponse) -> list[str]:
    pairs: list[tuple[str, object]] = [
        ("valid", _bool(result.valid)),
        ("entries_checked", result.entries_checked),
        ("head_sequence", result.head.sequence),
        ("head_hash", result.head.hash),
    ]
    if not result.valid:
        pairs += [
            ("first_broken_sequence", result.first_broken_sequence),
            ("problem", result.problem or "-"),
        ]
    return aligned(pairs)


def error_lines(error: DomainError) -> list[str]:
    lines = [f"error: {error.kind.name} {error.reason}: {error.message}"]
    if error.field_violations:
        lines.append("  field violations:")
        lines += [f"    {v.field}: {v.description}" for v in error.field_violations]
    if error.precondition_violations:
        lines.append("  precondition violations:")
        lines += [
            f"    {v.type} {v.subject}: {v.description}" for v in error.precondition_violations
        ]
    if error.metadata:
        lines.append("  metadata:")
        lines += aligned(sorted(error.metadata.items()), indent="    ")
    return lines


def error_object(error: DomainError) -> dict[str, Any]:
    return {
        "error": {
            "code": error.kind.name,
            "reason": error.reason,
            "message": error.message,
            "metadata": dict(error.metadata),
            "field_violations": [
                {"field": v.field, "description": v.description} for v in error.field_violations
            ],
            "precondition_violations": [
                {"type": v.type, "subject": v.subject, "description": v.description}
                for v in error.precondition_violations
            ],
        }
    }


# --- the parser --------------------------------------------------------------------------------


def _global_options(parser: argparse.ArgumentParser, env: Mapping[str, str] | None) -> None:
    """The connection options. On the top-level parser they carry the defaults; on each
    subcommand they are accepted too (defaults suppressed) so they may follow the command."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if env is None else value

    group = parser.add_argument_group("connection")
    group.add_argument(
        "--token",
        default=default((env or {}).get(TOKEN_VARIABLE, "")),
        help=f"bearer token (default: ${TOKEN_VARIABLE})",
    )
    for service in ("ledger", "candidate", "admission"):
        group.add_argument(
            f"--{service}",
            metavar="HOST:PORT",
            default=default(default_target(service, env) if env is not None else ""),
            help=f"{service} service (default: $FORGE_{service.upper()}_TARGET or 127.0.0.1:port)",
        )
    group.add_argument(
        "--timeout",
        type=float,
        default=default(30.0),
        help="seconds each call may take (default 30)",
    )
    group.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="machine output: protobuf JSON on stdout, errors as JSON on stderr",
    )


def _add_candidate_commands(commands: Any, leaf: Any) -> None:
    candidate = commands.add_parser("candidate", help="read a held run's continuity candidate")
    candidate_commands = candidate.add_subparsers(dest="action", required=True, metavar="ACTION")
    candidate_show = leaf(
        candidate_commands,
        "show",
        "show the candidate: proof, qualification, digests, holds and handoff",
        _candidate_show,
    )
    candidate_show.add_argument("run_id", metavar="RUN_ID")
    candidate_show.add_argument("--version", type=int, default=1, help="1 (default) or 2")


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m services.client",
        description="Operator CLI of invalid-read continuity: policy, requests, journals.",
        epilog="Exit status: 0 success, 1 refused (or a broken journal chain), 2 usage error.",
    )
    _global_options(parser, env)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def leaf(group: Any, name: str, help_text: str, handler: Callable[..., int]) -> Any:
        sub = group.add_parser(name, help=help_text, description=help_text)
        _global_options(sub, None)
        sub.set_defaults(handler=handler)
        return sub

    policy = commands.add_parser("policy", help="read or write the continuity policy")
    policy_commands = policy.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = leaf(policy_commands, "show", "show the current policy (or one revision)", _policy_show)
    show.add_argument("--revision", type=int, default=0, help="revision to show (default: current)")
    put = leaf(
        policy_commands,
        "set",
        "write the next policy revision; every setting is replaced (factory administrator)",
        _policy_set,
    )
    put.add_argument(
        "--expected-revision",
        type=int,
        required=True,
        help="the revision you read (a stale one is refused with POLICY_REVISION_STALE)",
    )
    switch = put.add_mutually_exclusive_group(required=True)
    switch.add_argument("--enable", dest="enabled", action="store_true", default=None)
    switch.add_argument("--disable", dest="enabled", action="store_false", default=None)
    put.add_argument("--window-seconds", type=int, required=True, help="lease window, 1..7200")
    put.add_argument(
        "--per-run-ticket-limit", type=int, default=0, help="positive; 0 keeps the default (50)"
    )
    put.add_argument(
        "--pending-ticket-limit", type=int, default=0, help="positive; 0 keeps the default (500)"
    )
    for flag in (
        "allow-unavailable-source-observations",
        "allow-pre-admission-recovery",
        "allow-readonly-observation-recovery",
    ):
        put.add_argument(f"--{flag}", action="store_true", help="off unless given")
    leaf(policy_commands, "history", "list every policy revision, newest first", _policy_history)

    _add_candidate_commands(commands, leaf)

    request = commands.add_parser("request", help="submit or read a continuity request")
    request_commands = request.add_subparsers(dest="action", required=True, metavar="ACTION")
    submit = leaf(
        request_commands,
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
        help=f"requested lease window, 1..{MAX_VALID_FOR_SECONDS}",
    )
    submit.add_argument("--version", type=int, default=1, help="1 (default) or 2")
    submit.add_argument("--acknowledge-no-new-grant", action="store_true")
    submit.add_argument("--acknowledge-original-consumption", action="store_true")
    submit.add_argument("--acknowledge-renewed-same-attempt-lease", action="store_true")
    submit.add_argument(
        "--acknowledge-unavailable-source-observations",
        action="store_true",
        default=None,
        help="version 2 only",
    )
    submit.add_argument(
        "--from-candidate",
        action="store_true",
        help="read the candidate first and submit its exact digests (when REQUEST_ID already "
        "has a saved ticket, resend the digests it was admitted with, so a retry after a lost "
        "response is the identical request)",
    )
    for name in DIGEST_NAMES:
        submit.add_argument(f"--{name.replace('_', '-')}", dest=name, metavar="DIGEST")
    request_show = leaf(
        request_commands, "show", "read the saved outcome of a request", _request_show
    )
    request_show.add_argument("run_id", metavar="RUN_ID")
    request_show.add_argument("request_id", metavar="REQUEST_ID")

    journal = commands.add_parser("journal", help="read or verify a run's native journal")
    journal_commands = journal.add_subparsers(dest="action", required=True, metavar="ACTION")
    journal_show = leaf(
        journal_commands, "show", "one line per entry: sequence, kind, actor, hash", _journal_show
    )
    journal_show.add_argument("run_id", metavar="RUN_ID")
    journal_show.add_argument(
        "--from", dest="from_sequence", type=int, default=1, help="first sequence (default 1)"
    )
    journal_verify = leaf(
        journal_commands, "verify", "recompute the whole hash chain", _journal_verify
    )
    journal_verify.add_argument("run_id", metavar="RUN_ID")

    commands_usage = leaf(
        commands, "commands", "command usage of a run (charged of limit)", _command_usage
    )
    commands_usage.add_argument("run_id", metavar="RUN_ID")
    return parser


# --- the commands ------------------------------------------------------------------------------


class Output:
    """Where and how a command prints."""

    def __init__(self, as_json: bool, stdout: TextIO) -> None:
        self.as_json = as_json
        self.stdout = stdout

    def emit(self, document: Message | dict[str, Any], lines: Sequence[str]) -> None:
        if self.as_json:
            value = to_json_object(document) if isinstance(document, Message) else document
            self.stdout.write(json.dumps(value, indent=2, sort_keys=False) + "\n")
        else:
            self.stdout.write("\n".join(lines) + "\n")


def _policy_show(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    policy = client.get_policy(args.revision)
    out.emit(policy, policy_lines(policy))
    return EXIT_OK


def _policy_set(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    policy = client.put_policy(
        args.expected_revision,
        enabled=args.enabled,
        window_seconds=args.window_seconds,
        per_run_ticket_limit=args.per_run_ticket_limit,
        pending_ticket_limit=args.pending_ticket_limit,
        allow_unavailable_source_observations=args.allow_unavailable_source_observations,
        allow_pre_admission_recovery=args.allow_pre_admission_recovery,
        allow_readonly_observation_recovery=args.allow_readonly_observation_recovery,
    )
    out.emit(policy, policy_lines(policy))
    return EXIT_OK


def _policy_history(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    policies = client.policy_revisions()
    out.emit({"policies": [to_json_object(p) for p in policies]}, policy_history_lines(policies))
    return EXIT_OK


def _candidate_show(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    candidate = client.invalid_read_continuity_candidate(args.run_id, args.version)
    out.emit(candidate, candidate_lines(candidate))
    return EXIT_OK


def _submission_digests(
    client: ContinuityClient, args: argparse.Namespace
) -> common_pb2.ContinuityDigests:
    given = {name: getattr(args, name) for name in DIGEST_NAMES if getattr(args, name)}
    if args.from_candidate:
        if given:
            raise UsageError(
                "request submit: --from-candidate reads the digests; do not also pass "
                + ", ".join(f"--{name.replace('_', '-')}" for name in given)
            )
        # A retry after a lost response must resend what was admitted: once admitted, the
        # candidate has moved on, so a saved ticket's digests are the ones this request carried.
        try:
            return client.invalid_read_continuity(args.run_id, args.request_id).digests
        except NotFound as absent:
            if absent.reason != "ADMISSION_NOT_FOUND":
                raise
        return client.invalid_read_continuity_candidate(args.run_id, args.version).digests
    missing = [name for name in DIGEST_NAMES if name not in given]
    if missing:
        raise UsageError(
            "request submit: pass --from-candidate, or all four digests; missing "
            + ", ".join(f"--{name.replace('_', '-')}" for name in missing)
        )
    return common_pb2.ContinuityDigests(**given)


def _request_submit(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    acknowledgements = {
        "acknowledge_no_new_grant": args.acknowledge_no_new_grant,
        "acknowledge_original_consumption": args.acknowledge_original_consumption,
        "acknowledge_renewed_same_attempt_lease": args.acknowledge_renewed_same_attempt_lease,
        "acknowledge_unavailable_source_observations": (
            args.acknowledge_unavailable_source_observations
        ),
    }
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
    out.emit(ticket, ticket_lines(ticket))
    return EXIT_OK


def _journal_show(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    entries = client.journal(args.run_id, args.from_sequence)
    out.emit(
        {"run_id": args.run_id, "entries": [to_json_object(e) for e in entries]},
        journal_lines(entries),
    )
    return EXIT_OK


def _journal_verify(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    result = client.verify_journal(args.run_id)
    out.emit(result, verification_lines(result))
    return EXIT_OK if result.valid else EXIT_REFUSED


def _command_usage(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    usage = client.command_usage(args.run_id)
    out.emit(
        usage,
        aligned(
            [
                ("used", usage.used),
                ("limit", usage.limit),
                ("remaining", max(usage.limit - usage.used, 0)),
            ]
        ),
    )
    return EXIT_OK


# --- entry point -------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run one command; returns the exit status (never raises SystemExit except for --help)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    environment = os.environ if env is None else env
    stdout, stderr = sys.stdout, sys.stderr
    as_json = "--json" in arguments
    try:
        parser = build_parser(environment)
        try:
            args = parser.parse_args(arguments)
        except SystemExit as done:  # --help
            return done.code if isinstance(done.code, int) else EXIT_OK
        as_json = bool(args.json)
        if not args.token:
            raise UsageError(f"no token: pass --token or set {TOKEN_VARIABLE}")
        with ContinuityClient(
            args.token,
            ledger_target=args.ledger,
            candidate_target=args.candidate,
            admission_target=args.admission,
            timeout=args.timeout,
        ) as client:
            handler: Callable[[ContinuityClient, argparse.Namespace, Output], int] = args.handler
            return handler(client, args, Output(as_json, stdout))
    except UsageError as usage:
        if as_json:
            document = {"error": {"code": "USAGE", "message": str(usage)}}
            stderr.write(json.dumps(document, indent=2) + "\n")
        else:
            stderr.write(f"usage error: {usage}\n(see python -m services.client --help)\n")
        return EXIT_USAGE
    except DomainError as error:
        if as_json:
            stderr.write(json.dumps(error_object(error), indent=2) + "\n")
        else:
            stderr.write("\n".join(error_lines(error)) + "\n")
        return EXIT_REFUSED
