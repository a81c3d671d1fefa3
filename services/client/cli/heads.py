"""``heads watch`` and ``signing-keys export``: the witnesses outside the database an auditor
checks a bundle against (ADR 0015; docs/formats.md, "Heads file", "Signing keys file")."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

from forge_audit.heads import Trust, TrustedKey
from forge_audit.verify import KeyFileError, load_trusted_keys
from services.client.cli._command import (
    EXIT_OK,
    EXIT_REFUSED,
    Output,
    Subcommands,
    UsageError,
    add_command,
    add_group,
    output_file,
)
from services.client.cli.render import aligned
from services.client.client import ContinuityClient
from services.client.heads import HeadsFile


def register(commands: Subcommands) -> None:
    heads = add_group(commands, "heads", "follow the ledger's signed heads (a monitor)")
    watch = add_command(
        heads,
        "watch",
        "append every new signed head to a heads file; alarm on a rollback or fork",
        _watch,
    )
    watch.add_argument("--out", required=True, metavar="FILE", help="the heads file to append to")
    watch.add_argument("--once", action="store_true", help="one pass until caught up, then exit")
    watch.add_argument(
        "--interval", type=float, default=5.0, metavar="SECONDS", help="between passes (5)"
    )
    watch.add_argument(
        "--trusted-key",
        action="append",
        default=[],
        metavar="KEYS",
        help="pinned keys (a signing-keys file or PEM): a head none of them vouches for is an "
        "alarm, not recorded (repeatable)",
    )
    keys = add_group(commands, "signing-keys", "the keys journal heads are signed with")
    export = add_command(
        keys,
        "export",
        "write the published signing keys (with validity windows) for verifiers to pin",
        _export_keys,
    )
    export.add_argument("--out", required=True, metavar="FILE", help="the keys file to write")
    export.add_argument(
        "--retire-current-at",
        metavar="TIME",
        help="set the current key's not_after (RFC 3339): the earlier-keys file a ledger "
        "publishes after a rotation",
    )


def _watch(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    if args.interval <= 0:
        raise UsageError("--interval must be positive")
    try:
        heads_file = HeadsFile(output_file(args.out))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UsageError(f"cannot read the heads file {args.out}: {error!r}") from None
    trust = _pinned(args.trusted_key)
    cursor, alarms, recorded = "", 0, 0
    while True:
        round_ = client.watch_heads_once(heads_file, cursor, trust)
        cursor, recorded = round_.cursor, recorded + round_.recorded
        for alarm in round_.alarms:
            sys.stderr.write(alarm.line() + "\n")
            sys.stderr.flush()
        alarms += len(round_.alarms)
        if args.once:
            break
        time.sleep(args.interval)
    out.emit(
        {"out": args.out, "recorded": recorded, "alarms": alarms, "runs": len(heads_file.newest)},
        aligned(
            [
                ("out", args.out),
                ("recorded", recorded),
                ("alarms", alarms),
                ("runs", len(heads_file.newest)),
            ]
        ),
    )
    return EXIT_REFUSED if alarms else EXIT_OK


def _pinned(paths: list[str]) -> Trust | None:
    if not paths:
        return None
    keys: dict[str, TrustedKey] = {}
    for path in paths:
        try:
            keys.update(load_trusted_keys(Path(path)))
        except (OSError, KeyFileError) as error:
            raise UsageError(f"--trusted-key: {error}") from None
    return Trust(keys)


def _export_keys(client: ContinuityClient, args: argparse.Namespace, out: Output) -> int:
    retire: datetime | None = None
    if args.retire_current_at:
        try:
            retire = datetime.fromisoformat(args.retire_current_at.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(
                f"--retire-current-at: not an RFC 3339 time: {args.retire_current_at}"
            ) from None
        if retire.tzinfo is None:
            raise UsageError("--retire-current-at: give the time zone (e.g. Z)")
    document = client.signing_keys_document(retire)
    target = output_file(args.out)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        with os.fdopen(os.open(target, flags, 0o644), "w", encoding="utf-8") as file:
            file.write(json.dumps(document, indent=2) + "\n")
    except OSError as error:
        raise UsageError(f"cannot write the keys file: {error}") from None
    keys = document["keys"]
    out.emit(
        {"out": args.out, "keys": keys},
        [
            *aligned([("out", args.out), ("keys", len(keys))]),
            f"verify offline: forge-continuity-verify --trusted-key {args.out} BUNDLE",
        ],
    )
    return EXIT_OK
