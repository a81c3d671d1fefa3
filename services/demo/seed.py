"""Write a held run into the ledger exactly as the platform's workers and engine would.

The native journal of a run held on a rejected evidence read is, in order:

1. ``run_started``          {task_id, attempt_id, source_revision, configuration_digest,
                             checkpoint_mode} (the older worker's checkpoint-mode adoption)
2. ``command_executed`` ×N  {command_id, command_digest}       (commands run before the hold)
3. ``checkpoint_stored``    {checkpoint_digest}                 (blob: the original checkpoint)
4. ``model_request_sent``   {request_id, checkpoint_digest}
5. ``response_consumed``    {request_id, response_digest, consumed_at} (blob: the raw response)
6. ``tool_call_granted``    {call_id, tool_name, args_digest}   (one per call in the response)
7. ``run_held``             {reason: "invalid_evidence_query", call_id, logged_error}

Fixtures come from tests/data/fixtures (generated from the real historical SDK).

``python -m services.demo.seed --token <platform writer token> RUN_ID`` writes one such run into
running services (the README's walkthroughs use it against ``make run``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import grpc

from forge.continuity.v1 import common_pb2, ledger_pb2, ledger_pb2_grpc
from shared.continuity.canonical import digest_of, sha256_digest
from shared.continuity.policy_epochs import HISTORICAL_EPOCHS
from shared.continuity.qualification import DEFAULT_QUALIFIED_PROFILE
from shared.contract.channels import open_channel
from shared.contract.terms import PROVIDER_TIMEOUT_V1
from shared.runtime.config import DEFAULT_PORTS, target_variable
from shared.runtime.errors import from_rpc_error

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "data" / "fixtures"
K = common_pb2.JournalEntryKind
TIME_BUDGET_PROTOCOL = PROVIDER_TIMEOUT_V1
CONFIGURATION_DIGEST = digest_of({"provider": "openai", "model": "gpt-5.2", "settings": {}})
# The older required-checkpoint worker's adoption, as its run_started records it.
HISTORICAL_CHECKPOINT_MODE: Mapping[str, str] = MappingProxyType(
    next(iter(HISTORICAL_EPOCHS)).as_dict()
)


@dataclass(frozen=True)
class HeldRunFixture:
    """One generated held run: the stored bytes and how it was consumed."""

    name: str
    checkpoint: bytes
    raw_response: bytes
    consumed_at: str
    version: int
    expect: dict[str, Any]

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        message = json.loads(self.raw_response)["choices"][0]["message"]
        return list(message.get("tool_calls") or [])


def load_fixture(name: str) -> HeldRunFixture:
    manifest = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))[name]
    case = FIXTURES / name
    return HeldRunFixture(
        name=name,
        checkpoint=(case / "checkpoint.json").read_bytes(),
        raw_response=(case / "raw_response.json").read_bytes(),
        consumed_at=manifest["consumed_at"],
        version=int(manifest["version"]),
        expect=manifest["expect"],
    )


@dataclass
class SeededRun:
    """What was written, for assertions."""

    run_id: str
    attempt_id: str
    checkpoint_digest: str
    response_digest: str
    head_hash: str
    entries: list[common_pb2.JournalEntry] = field(default_factory=list)


Entry = tuple[int, dict[str, Any]]


def contract_grants(checkpoint: bytes) -> dict[str, str]:
    """tool name → the grant the checkpoint's tool contract gives it (``metadata.grant``)."""
    state = json.loads(checkpoint)["state"]
    return {
        str(tool["name"]): str((tool.get("metadata") or {}).get("grant"))
        for tool in state["model_request_parameters"]["function_tools"]
        if (tool.get("metadata") or {}).get("grant")
    }


def held_run_entries(
    fixture: HeldRunFixture,
    *,
    task_id: str,
    attempt_id: str,
    source_revision: str,
    commands_before: int,
    after_consume: Sequence[Entry] = (),
    consume: bool = True,
    checkpoint_mode: Mapping[str, Any] | None = None,
) -> list[Entry]:
    """The native journal of the held run, as (kind, payload) pairs. ``checkpoint_mode`` is the
    adoption ``run_started`` records (None: the run recorded none)."""
    checkpoint_digest = sha256_digest(fixture.checkpoint)
    response_digest = sha256_digest(fixture.raw_response)
    entries: list[Entry] = [
        (
            K.JOURNAL_ENTRY_KIND_RUN_STARTED,
            {
                "task_id": task_id,
                "attempt_id": attempt_id,
                "source_revision": source_revision,
                "configuration_digest": CONFIGURATION_DIGEST,
                **(
                    {"checkpoint_mode": dict(checkpoint_mode)}
                    if checkpoint_mode is not None
                    else {}
                ),
            },
        )
    ]
    entries += [
        (
            K.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED,
            {
                "command_id": f"cmd-{n:02d}",
                "command_digest": digest_of({"argv": ["make", f"step-{n}"]}),
            },
        )
        for n in range(1, commands_before + 1)
    ]
    entries += [
        (K.JOURNAL_ENTRY_KIND_CHECKPOINT_STORED, {"checkpoint_digest": checkpoint_digest}),
        (
            K.JOURNAL_ENTRY_KIND_MODEL_REQUEST_SENT,
            {"request_id": "model-request-1", "checkpoint_digest": checkpoint_digest},
        ),
    ]
    if consume:
        entries.append(
            (
                K.JOURNAL_ENTRY_KIND_RESPONSE_CONSUMED,
                {
                    "request_id": "model-request-1",
                    "response_digest": response_digest,
                    "consumed_at": fixture.consumed_at,
                },
            )
        )
    evidence_call = ""
    grants = contract_grants(fixture.checkpoint)
    for call in fixture.tool_calls:
        name = call["function"]["name"]
        if name == "read_run_evidence":
            evidence_call = call["id"]
        arguments = call["function"]["arguments"]
        try:
            args_digest = digest_of(json.loads(arguments))
        except ValueError:
            args_digest = ""
        entries.append(
            (
                K.JOURNAL_ENTRY_KIND_TOOL_CALL_GRANTED,
                {
                    "call_id": call["id"],
                    "tool_name": name,
                    "args_digest": args_digest,
                    # what the worker grants: the contract's grant, at the run's source
                    **({"grant": grants[name]} if name in grants else {}),
                    "source_cut": source_revision,
                },
            )
        )
    entries += list(after_consume)
    entries.append(
        (
            K.JOURNAL_ENTRY_KIND_RUN_HELD,
            {
                "reason": "invalid_evidence_query",
                "call_id": evidence_call,
                "logged_error": "Tool 'read_run_evidence' exceeded max retries count of 0.",
            },
        )
    )
    return entries


#: The source revision a seeded run records unless told another (a worker serving it declares
#: it with FORGE_WORKER_SOURCE_REVISION, or seeds the revision its own tree derives).
SEEDED_SOURCE_REVISION = "git:4f1c2a9"


def seed_held_run(
    ledger: ledger_pb2_grpc.LedgerServiceStub,
    fixture: HeldRunFixture,
    run_id: str,
    *,
    commands_before: int = 11,
    command_limit: int = 22,
    source_profile: str = DEFAULT_QUALIFIED_PROFILE,
    provider_timeout_seconds: int = 900,
    active_deadline: Any = None,
    time_budget_protocol: str = TIME_BUDGET_PROTOCOL,
    after_consume: Sequence[Entry] = (),
    consume: bool = True,
    edit: Callable[[list[Entry]], list[Entry]] | None = None,
    checkpoint_mode: Mapping[str, Any] | None = HISTORICAL_CHECKPOINT_MODE,
    source_revision: str = SEEDED_SOURCE_REVISION,
) -> SeededRun:
    """Register the run, store its blobs and append its native journal (as a platform writer)."""
    attempt_id = f"{run_id}-attempt-1"
    ledger.CreateRun(
        ledger_pb2.CreateRunRequest(
            run_id=run_id,
            task_id=f"{run_id}-task",
            attempt_id=attempt_id,
            source_revision=source_revision,
            configuration_digest=CONFIGURATION_DIGEST,
            provider_timeout_seconds=provider_timeout_seconds,
            active_deadline=active_deadline,
            command_limit=command_limit,
            time_budget_protocol=time_budget_protocol,
            source_profile=source_profile,
        )
    )
    checkpoint = ledger.PutBlob(
        ledger_pb2.PutBlobRequest(content=fixture.checkpoint, media_type="application/json")
    ).digest
    response = ledger.PutBlob(
        ledger_pb2.PutBlobRequest(content=fixture.raw_response, media_type="application/json")
    ).digest
    entries = held_run_entries(
        fixture,
        task_id=f"{run_id}-task",
        attempt_id=attempt_id,
        source_revision=source_revision,
        commands_before=commands_before,
        after_consume=after_consume,
        consume=consume,
        checkpoint_mode=checkpoint_mode,
    )
    if edit is not None:
        entries = edit(entries)
    seeded = SeededRun(run_id, attempt_id, checkpoint, response, "")
    for kind, payload in entries:
        appended = ledger.AppendJournalEntry(
            ledger_pb2.AppendJournalEntryRequest(
                run_id=run_id,
                expected_head_hash=seeded.head_hash,
                kind=kind,  # type: ignore[arg-type]
                payload_json=json.dumps(payload),
            )
        ).entry
        seeded.entries.append(appended)
        seeded.head_hash = appended.hash
    return seeded


def main(argv: Sequence[str] | None = None) -> int:
    """Seed one held run through the ledger's public RPCs; print what was written."""
    parser = argparse.ArgumentParser(
        prog="python -m services.demo.seed",
        description="Write a held run from a historical fixture, as a platform writer would "
        "(11 of 22 commands used, held on a rejected read_run_evidence query).",
    )
    parser.add_argument("run_id", metavar="RUN_ID", help="the new run's id (must be unused)")
    parser.add_argument(
        "--fixture",
        default="v1_basic",
        help="fixture under tests/data/fixtures (default: %(default)s)",
    )
    parser.add_argument(
        "--ledger",
        default=os.environ.get(target_variable("ledger")) or f"127.0.0.1:{DEFAULT_PORTS['ledger']}",
        metavar="HOST:PORT",
        help="ledger address (default: %(default)s: $FORGE_LEDGER_TARGET or make run's port)",
    )
    parser.add_argument(
        "--token",
        default=None,
        help="a platform writer's bearer token (default: $FORGE_TOKEN)",
    )
    args = parser.parse_args(argv)
    token = args.token or os.environ.get("FORGE_TOKEN", "")
    if not token:
        parser.error("no token: pass --token or set FORGE_TOKEN")
    try:
        fixture = load_fixture(args.fixture)
    except (KeyError, OSError):
        parser.error(f"no fixture named {args.fixture!r} under {FIXTURES}")
    with open_channel(args.ledger, token) as channel:
        try:
            seeded = seed_held_run(ledger_pb2_grpc.LedgerServiceStub(channel), fixture, args.run_id)
        except grpc.RpcError as refused:
            error = from_rpc_error(refused)
            print(f"error: {error}", file=sys.stderr)
            if error.reason in ("RUN_CONFLICT", "JOURNAL_HEAD_STALE"):
                print(
                    f"{args.run_id} was written before: choose another RUN_ID, or start from a "
                    "clean database",
                    file=sys.stderr,
                )
            return 1
    print(
        f"seeded held run {seeded.run_id}: attempt {seeded.attempt_id}, "
        f"{len(seeded.entries)} journal entries, head {seeded.head_hash}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
