"""``runs list``, ``runs show`` and ``requests list``: find the work (ADR 0022). A page at a
time, newest update first; ``--state`` is a short state name in any case (``held``,
``QUEUED``) and joins ``--filter`` with AND; the last line names the ``--page-token`` of the
next page. ``runs show RUN`` is one run at a glance, with its console link."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from forge.continuity.v1 import common_pb2, ledger_pb2
from services.client.cli._command import EXIT_OK, Output, Subcommands, UsageError, add_command
from services.client.cli.render import (
    aligned,
    execution_request_lines,
    execution_state,
    table,
    to_json_object,
)
from services.client.client import ContinuityClient
from shared.contract.terms import enum_prefix, enum_short_name
from shared.runtime.config import DEFAULT_GATEWAY_PORT, GATEWAY_PORT_VARIABLE

# A generated enum's wrapper (keys(), Value()), whichever enum it is.
EnumWrapper = Any


def _paging(command: argparse.ArgumentParser, state_example: str) -> None:
    command.add_argument(
        "--state", help=f"only this state, short name in any case (e.g. {state_example})"
    )
    command.add_argument(
        "--filter",
        dest="filter_text",
        default="",
        metavar="EXPR",
        help="an AIP-160 filter joined by AND, e.g. 'updated_at > \"2026-12-01T00:00:00Z\"'",
    )
    command.add_argument(
        "--page-size", type=int, default=0, metavar="N", help="rows per page (default 50, max 500)"
    )
    command.add_argument(
        "--page-token", default="", metavar="TOKEN", help="the next page a previous list named"
    )


def register(commands: Subcommands) -> None:
    runs = commands.add_parser("runs", help="find runs by their continuity state")
    actions = runs.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = add_command(
        actions, "list", "runs with their continuity state, newest update first", _runs
    )
    _paging(listing, "held")
    show = add_command(
        actions,
        "show",
        "one run: its facts, continuity state, command ledger, newest request and console link",
        _show_run,
    )
    show.add_argument("run_id", metavar="RUN_ID")


def add_requests_list(requests: Subcommands) -> None:
    """``requests list [RUN_ID]``: one run's requests, or (no RUN_ID) a page across runs."""
    listing = add_command(
        requests,
        "list",
        "execution requests with their state: of one run, or across runs a page at a time",
        _requests,
    )
    listing.add_argument("run_id", metavar="RUN_ID", nargs="?", help="only this run's requests")
    _paging(listing, "queued")


def _filter(args: argparse.Namespace, states: EnumWrapper) -> str:
    # --state is checked here, in the flag's own words: the server would answer "filter:".
    parts = [f"state = {_short_state(states, args.state)}"] if args.state else []
    if args.filter_text:
        parts.append(args.filter_text)
    return " AND ".join(parts)


def _next(token: str) -> list[str]:
    return [f"next page: --page-token {token}"] if token else []


def _runs(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    page = client.list_runs(
        filter_text=_filter(args, ledger_pb2.RunContinuityState),
        page_size=args.page_size,
        page_token=args.page_token,
    )
    rows = [
        (
            row.run.run_id,
            enum_short_name(ledger_pb2.RunContinuityState, row.continuity_state).lower(),
            row.updated_at.ToJsonString(),
            row.current_execution_request_id or "-",
        )
        for row in page.runs
    ]
    lines = table(("RUN", "STATE", "UPDATED", "EXECUTION REQUEST"), rows) if rows else ["no runs"]
    out.emit(page, [*lines, *_next(page.next_page_token)])
    return EXIT_OK


def _short_state(states: EnumWrapper, text: str) -> str:
    """``text`` as a short state name of ``states`` (lower case), or a usage error naming the
    states there are."""
    prefix = enum_prefix(states)
    name = text.upper().removeprefix(prefix)
    if name == "UNSPECIFIED" or prefix + name not in states.keys():  # noqa: SIM118
        known = ", ".join(k.removeprefix(prefix).lower() for k in states.keys()[1:])
        raise UsageError(f"--state: unknown state {text!r} (states: {known})")
    return name.lower()


def console_link(run_id: str, env: Mapping[str, str]) -> str:
    """The run's page on the gateway `make run` starts (FORGE_GATEWAY_PORT moves it)."""
    port = env.get(GATEWAY_PORT_VARIABLE) or DEFAULT_GATEWAY_PORT
    return f"http://127.0.0.1:{port}/console/runs/{quote(run_id, safe='')}"


def _show_run(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    answer = client.get_run(args.run_id)
    listed = client.list_runs(filter_text=f"run_id = {args.run_id}", page_size=1).runs
    state = (
        enum_short_name(ledger_pb2.RunContinuityState, listed[0].continuity_state).lower()
        if listed and listed[0].run.run_id == args.run_id
        else "-"
    )
    usage = client.command_usage(args.run_id)
    requests = client.execution_requests(args.run_id)
    newest = requests[-1] if requests else None
    run = answer.run
    link = console_link(args.run_id, os.environ)
    lines = aligned(
        [
            ("run", run.run_id),
            ("attempt", run.attempt_id),
            ("task", run.task_id),
            ("source", f"{run.source_revision} · {run.source_profile}"),
            ("continuity state", state),
            ("command ledger", f"{usage.used} of {usage.limit} commands used"),
            (
                "newest request",
                f"{newest.request_id} ({newest.execution_request_id}): {execution_state(newest)}"
                if newest
                else "none",
            ),
            ("journal head", f"#{answer.head.sequence}"),
            ("console", link),
        ]
    )
    document = {
        "run": to_json_object(run),
        "continuity_state": state,
        "usage": to_json_object(usage),
        "newest_execution_request": to_json_object(newest) if newest else None,
        "console": link,
    }
    out.emit(document, lines)
    return EXIT_OK


def _state_number(text: str) -> common_pb2.ExecutionRequestState.ValueType:
    name = _short_state(common_pb2.ExecutionRequestState, text)
    return common_pb2.ExecutionRequestState.Value(
        enum_prefix(common_pb2.ExecutionRequestState) + name.upper()
    )


def _requests(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    if args.run_id:
        if args.filter_text or args.page_size or args.page_token:
            raise UsageError("--filter, --page-size and --page-token list across runs: omit RUN_ID")
        states = [_state_number(args.state)] if args.state else []
        found = client.execution_requests(args.run_id, states)
        out.emit(
            {"execution_requests": [to_json_object(r) for r in found]},
            execution_request_lines(found),
        )
        return EXIT_OK
    page = client.list_all_execution_requests(
        filter_text=_filter(args, common_pb2.ExecutionRequestState),
        page_size=args.page_size,
        page_token=args.page_token,
    )
    rows = [
        (r.execution_request_id, r.run_id, execution_state(r), r.updated_at.ToJsonString())
        for r in page.execution_requests
    ]
    header = ("EXECUTION REQUEST", "RUN", "STATE", "UPDATED")
    lines = table(header, rows) if rows else ["no execution requests"]
    out.emit(page, [*lines, *_next(page.next_page_token)])
    return EXIT_OK
