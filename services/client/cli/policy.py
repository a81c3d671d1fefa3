"""``policy show | set | history``: read or write the continuity policy."""

from __future__ import annotations

import argparse

from services.client.cli._command import EXIT_OK, Output, Subcommands, add_command, add_group
from services.client.cli.render import policy_history_lines, policy_lines, to_json_object
from services.client.client import ContinuityClient
from shared.contract.terms import MAX_WINDOW_SECONDS


def register(commands: Subcommands) -> None:
    actions = add_group(commands, "policy", "read or write the continuity policy")
    show = add_command(actions, "show", "show the current policy (or one revision)", _show)
    show.add_argument("--revision", type=int, default=0, help="revision to show (default: current)")
    put = add_command(
        actions,
        "set",
        "write the next policy revision; every setting is replaced (factory administrator)",
        _set,
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
    put.add_argument(
        "--window-seconds", type=int, required=True, help=f"lease window, 1..{MAX_WINDOW_SECONDS}"
    )
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
    add_command(actions, "history", "list every policy revision, newest first", _history)


def _show(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    policy = client.get_policy(args.revision)
    out.emit(policy, policy_lines(policy), field="policy")
    return EXIT_OK


def _set(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
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
    # Say first that the write happened: the settings below alone read like `policy show`.
    written = f"written, revision {policy.revision}"
    out.emit(policy, [written, *policy_lines(policy)], field="policy")
    return EXIT_OK


def _history(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    policies = client.policy_revisions()
    out.emit({"policies": [to_json_object(p) for p in policies]}, policy_history_lines(policies))
    return EXIT_OK
