"""``python tools/history_check.py``: check a model run's history against the runs' audit bundles,
sharing no code with the services (docs/reliability.md, "The history checker").

The history (one JSON line per event: ``invoke``, then ``ok``, ``fail`` or ``info``) is what the
clients saw; the bundles are what the ledger kept, each first verified by
``forge-continuity-verify`` against the pinned signing key. The checker reads both with the
standard library only and reports every anomaly:

- **lost or duplicated**: an acknowledged write is in its run's journal exactly once (a repeat
  the spec answers without writing, such as a replayed admission, adds nothing);
- **phantom**: a journal line no acknowledged write explains, unless the spec writes it without
  a request (an expiry by a sweep) or an operation whose outcome was unknown (``info``) would
  have written it: each such operation explains each line it would have written at most once
  (an admission's two, a recovery's two, a retry decision's settlement and the queued line of
  the new request that settlement names), so a write whose answer was lost is journaled once or
  not at all, never twice;
- **order**: within a run, a write acknowledged before another was invoked comes first;
- **state**: every acknowledged ticket's events form one path, queued then claimed then one end,
  with nothing after the end, except the one recovery's requeue of a request that ended
  unclaimed (failed or expired), or of a request that failed after a claim by a recovery whose
  settlement or witness line precedes it (a provider refusal, a read-only observation); a
  reconciliation's settlement ends the request it decides.

Exit status 0: no anomaly; 1: anomalies (each printed); 2: usage error or a bundle that fails
verification.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

HISTORY_FORMAT = "forge.continuity.model-history/1"
ENDS = ("completed", "failed", "cancelled", "expired", "reconciled")
#: The ends the one never-claimed recovery may queue a request again from, if it was never claimed.
UNCLAIMED_ENDS = ("failed", "expired")
#: The recoveries of a request that failed after a claim (a provider refusal before admission, a
#: read-only observation left unknown), and the line naming the recovery that each writes first.
NATIVE_WITNESSES = {
    "recover_refusal": ("refusal_settlement", "recovery_witness"),
    "recover_observation": ("readonly_observation_recovery",),
}
#: Operations keyed by the caller (a request id): an identical retry returns the first answer.
IDEMPOTENT = frozenset({"admit"})


@dataclass
class Operation:
    """One invocation and how it ended."""

    index: int
    process: str
    f: str
    value: dict[str, Any]
    invoked: int
    outcome: str = "info"  # no completion recorded: the answer was lost
    result: dict[str, Any] = field(default_factory=dict)
    completed: int | None = None


@dataclass
class Line:
    sequence: int
    kind: str
    payload: dict[str, Any]


def read_history(path: Path) -> list[Operation]:
    operations: dict[int, Operation] = {}
    with path.open(encoding="utf-8") as lines:
        header = json.loads(next(lines))
        if header.get("format") != HISTORY_FORMAT:
            raise ValueError(f"{path}: not a {HISTORY_FORMAT} history")
        for text in lines:
            event = json.loads(text)
            if event["type"] == "invoke":
                operations[event["index"]] = Operation(
                    event["index"], event["process"], event["f"], event["value"], event["time"]
                )
            else:
                operation = operations[event["index"]]
                operation.outcome, operation.result = event["type"], event["value"]
                operation.completed = event["time"]
    return list(operations.values())


def read_bundle(path: Path) -> tuple[str, list[Line]]:
    run_id, lines = "", []
    with path.open(encoding="utf-8") as records:
        for text in records:
            record = json.loads(text)
            if record["type"] == "manifest":
                run_id = record["run_id"]
            elif record["type"] == "entry":
                payload = json.loads(record["payload_json"])
                lines.append(Line(record["sequence"], record["kind"], payload))
    return run_id, lines


def verify_bundles(bundles: Sequence[Path], verifier: Sequence[str], key: Path) -> list[str]:
    """Each bundle through the offline verifier; the ones it does not accept, with its words."""
    broken = []
    for bundle in bundles:
        checked = subprocess.run(
            [*verifier, "--trusted-key", str(key), str(bundle)],
            capture_output=True,
            text=True,
            check=False,
        )
        if checked.returncode != 0:
            broken.append(f"{bundle.name}: {checked.stdout.strip()} {checked.stderr.strip()}")
    return broken


def _written_by(operation: Operation) -> list[tuple[str, str]]:
    """The journal lines (kind, key) an acknowledged operation writes, by the spec."""
    value, result = operation.value, operation.result
    request = value.get("execution_request_id") or result.get("execution_request_id", "")
    if operation.f == "admit":
        return [
            ("migration_settlement", value["request_id"]),
            ("ownership_claim", result["execution_request_id"]),
        ]
    if operation.f == "claim":
        return [("worker_claimed", f"{request}#{result['lease_generation']}")]
    if operation.f == "complete":
        return [("request_event", f"{request}#completed")]
    if operation.f == "fail":
        return [("request_failed", request)]
    if operation.f == "record_command" and result.get("charged"):
        return [("command_executed", value["command_id"])]
    return _recovery_writes(operation, request)


def _recovery_writes(operation: Operation, request: str) -> list[tuple[str, str]]:
    """What the failure before a claim, the one recovery and a reconciliation write."""
    value, result = operation.value, operation.result
    if operation.f == "fail_unclaimed":
        return [("request_failed", request)]
    if operation.f == "recover" and result.get("created"):
        # the one recovery: its witness, and the same request queued again
        return [
            ("recovery_witness", value["recovery_id"]),
            ("request_event", f"{request}#requeued_by_recovery"),
        ]
    if operation.f in NATIVE_WITNESSES and result.get("created"):
        # a recovery after a failed claim: its settlement or witness, and the request queued
        return [
            *((kind, value["recovery_id"]) for kind in NATIVE_WITNESSES[operation.f]),
            ("request_event", f"{request}#requeued_by_recovery"),
        ]
    if operation.f == "verify":
        return [("reconciliation_verification", value["reconciliation_id"])]
    if operation.f == "reconcile" and result.get("created"):
        retry = result.get("retry_execution_request_id", "")
        queued = [("request_event", f"{retry}#queued_by_reconciliation")] if retry else []
        return [("reconciliation_settlement", value["reconciliation_id"]), *queued]
    return []


@dataclass(frozen=True)
class _Maybe:
    """A line an operation of unknown outcome would have written: its kind and key, or every
    key beginning with ``key`` when the answer would have named the rest (a lease generation,
    the execution request an admission creates)."""

    kind: str
    key: str
    prefix: bool = False

    def matches(self, found: tuple[str, str]) -> bool:
        kind, key = found
        return kind == self.kind and (key.startswith(self.key) if self.prefix else key == self.key)


def _request(value: dict[str, Any]) -> str:
    return str(value.get("execution_request_id", ""))


def _native_recovery(kinds: tuple[str, ...], value: dict[str, Any]) -> list[_Maybe]:
    """A recovery after a claimed failure: the lines naming it, and the request's requeue."""
    named = [_Maybe(kind, str(value.get("recovery_id", ""))) for kind in kinds]
    return [*named, _Maybe("request_event", f"{_request(value)}#requeued_by_recovery")]


#: The journal lines each operation may have written when its answer was lost, by the spec.
_MAYBE: dict[str, Callable[[dict[str, Any]], list[_Maybe]]] = {
    "admit": lambda v: [
        _Maybe("migration_settlement", str(v["request_id"])),
        _Maybe("ownership_claim", "", prefix=True),
    ],
    "claim": lambda v: [_Maybe("worker_claimed", f"{_request(v)}#", prefix=True)],
    "complete": lambda v: [_Maybe("request_event", f"{_request(v)}#completed")],
    "cancel": lambda v: [_Maybe("request_event", f"{_request(v)}#cancelled")],
    "fail": lambda v: [_Maybe("request_failed", _request(v))],
    "record_command": lambda v: [_Maybe("command_executed", str(v["command_id"]))],
    "fail_unclaimed": lambda v: [_Maybe("request_failed", _request(v))],
    "recover": lambda v: [
        _Maybe("recovery_witness", str(v.get("recovery_id", ""))),
        _Maybe("request_event", f"{_request(v)}#requeued_by_recovery"),
    ],
    **{f: partial(_native_recovery, kinds) for f, kinds in NATIVE_WITNESSES.items()},
    "verify": lambda v: [
        _Maybe("reconciliation_verification", str(v.get("reconciliation_id", "")))
    ],
    "reconcile": lambda v: [
        _Maybe("reconciliation_settlement", str(v.get("reconciliation_id", "")))
    ],
}


def _maybe_written(operation: Operation, lines: list[Line]) -> list[_Maybe]:
    """The journal lines an operation whose answer was lost may have written. A lost decision
    to retry names its new request nowhere in the history: its settlement line does, and the
    retry's queued line is the one that settlement names (only with it, once)."""
    written = _MAYBE.get(operation.f)
    maybe = [] if written is None else written(operation.value)
    if operation.f == "reconcile":
        decision = str(operation.value.get("reconciliation_id", ""))
        maybe += [
            _Maybe("request_event", f"{retry}#queued_by_reconciliation")
            for line in lines
            if line.kind == "reconciliation_settlement"
            and line.payload.get("reconciliation_id") == decision
            and (retry := str(line.payload.get("retry_execution_request_id", "")))
        ]
    return maybe


#: Each journal line kind a write of the history leaves, and the key it is found by.
_KEYS = {
    "migration_settlement": lambda p: str(p.get("request_id", "")),
    "ownership_claim": lambda p: str(p.get("execution_request_id", "")),
    "worker_claimed": lambda p: f"{p.get('execution_request_id')}#{p.get('lease_generation')}",
    "request_event": lambda p: f"{p.get('execution_request_id')}#{p.get('event')}",
    "request_failed": lambda p: str(p.get("execution_request_id", "")),
    "command_executed": lambda p: str(p.get("command_id", "")),
    "recovery_witness": lambda p: str(p.get("recovery_id", "")),
    "refusal_settlement": lambda p: str(p.get("recovery_id", "")),
    "readonly_observation_recovery": lambda p: str(p.get("recovery_id", "")),
    "reconciliation_verification": lambda p: str(p.get("reconciliation_id", "")),
    "reconciliation_settlement": lambda p: str(p.get("reconciliation_id", "")),
}


def _key(line: Line) -> tuple[str, str] | None:
    keyed = _KEYS.get(line.kind)
    return None if keyed is None else (line.kind, keyed(line.payload))


def check(operations: Iterable[Operation], journals: dict[str, list[Line]]) -> list[str]:
    """Every anomaly of the history against the journals, in words."""
    anomalies: list[str] = []
    by_run: dict[str, list[Operation]] = defaultdict(list)
    for operation in operations:
        if "run_id" in operation.value:
            by_run[operation.value["run_id"]].append(operation)
    for run_id, run_operations in sorted(by_run.items()):
        lines = journals.get(run_id)
        if lines is None:
            anomalies.append(f"{run_id}: no bundle")
            continue
        anomalies += _check_run(run_id, run_operations, lines)
    return anomalies


@dataclass
class _Acknowledged:
    """What the history's acknowledged operations wrote, by key, and where each write is."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    cancelled: set[str] = field(default_factory=set)
    written_at: list[tuple[Operation, int]] = field(default_factory=list)
    #: What the operations whose outcome was unknown may have written, one list each.
    unknown: list[list[_Maybe]] = field(default_factory=list)


def _acknowledged(
    operations: list[Operation], where: dict[tuple[str, str], list[int]], lines: list[Line]
) -> _Acknowledged:
    """A key written more than once (a request failed before its recovery and again after) is
    matched in order: the n-th acknowledged write of it to its n-th journal line."""
    found = _Acknowledged()
    for operation in operations:
        if operation.outcome == "info":
            found.unknown.append(_maybe_written(operation, lines))
        if operation.outcome != "ok":
            continue
        if operation.f == "cancel":
            found.cancelled.add(operation.value["execution_request_id"])
        for key in _written_by(operation):
            if operation.f in IDEMPOTENT and key in found.counts:
                continue  # a retry answered from what the first wrote: it writes nothing more
            if found.counts[key] < len(where.get(key, ())):
                found.written_at.append((operation, where[key][found.counts[key]]))
            found.counts[key] += 1
    return found


def _check_run(run_id: str, operations: list[Operation], lines: list[Line]) -> list[str]:
    # What the platform wrote before the run was held is no write of the history's.
    seeded = max(
        (op.result["head_sequence"] for op in operations if op.f == "seed" and op.outcome == "ok"),
        default=0,
    )
    lines = [line for line in lines if line.sequence > seeded]
    found = Counter(key for line in lines if (key := _key(line)) is not None)
    where: dict[tuple[str, str], list[int]] = defaultdict(list)
    for line in sorted(lines, key=lambda line: line.sequence):
        if (key := _key(line)) is not None:
            where[key].append(line.sequence)
    acknowledged = _acknowledged(operations, where, lines)
    anomalies = [
        f"{run_id}: {key} acknowledged {count}x, journaled {found[key]}x"
        for key, count in acknowledged.counts.items()
        if found[key] != count
    ]
    cancellations = {("request_event", f"{r}#cancelled") for r in acknowledged.cancelled}
    anomalies += [
        f"{run_id}: {key[1]} acknowledged cancelled, journaled {found[key]}x"
        for key in cancellations
        if found[key] != 1
    ]
    explained = set(acknowledged.counts) | cancellations
    unexplained = {
        key: count
        for key, count in found.items()
        if key not in explained
        and not (key[0] == "request_event" and key[1].endswith("#expired"))  # a sweep's
    }
    anomalies += _check_unknown(run_id, unexplained, acknowledged.unknown)
    anomalies += _check_order(run_id, acknowledged.written_at)
    return anomalies + _check_paths(run_id, lines)


def _check_unknown(
    run_id: str, unexplained: dict[tuple[str, str], int], unknown: list[list[_Maybe]]
) -> list[str]:
    """Lines no acknowledged write explains: each must be the one line of an operation whose
    outcome was unknown; a key journaled twice is a duplicate whatever explains it."""
    anomalies = []
    unused = [list(maybe) for maybe in unknown]
    for key, count in sorted(unexplained.items()):
        if count > 1:
            anomalies.append(f"{run_id}: {key} journaled {count}x, acknowledged by no write")
            continue
        owner = next((m for m in unused if any(line.matches(key) for line in m)), None)
        if owner is None:
            anomalies.append(f"{run_id}: {key} journaled 1x, acknowledged by no write")
            continue
        # the operation's other lines (an admission's two) may be explained by it too
        owner[:] = [line for line in owner if not line.matches(key)]
        if not owner:
            unused.remove(owner)
    return anomalies


def _check_order(run_id: str, written_at: list[tuple[Operation, int]]) -> list[str]:
    """A write acknowledged before another was invoked is journaled before it."""
    return [
        f"{run_id}: {earlier.f} (acknowledged first) is at {first}, after {later.f} at {second}"
        for earlier, first in written_at
        for later, second in written_at
        if earlier is not later
        and earlier.completed is not None
        and earlier.completed < later.invoked
        and not first < second
    ]


def _check_paths(run_id: str, lines: list[Line]) -> list[str]:
    """Each request: queued, then at most one claim per generation, then one end, then nothing;
    except that the one recovery queues a request that failed or expired before any claim again. A
    reconciliation's settlement ends the request it decides."""
    anomalies = []
    ended: dict[str, str] = {}
    claimed: set[str] = set()
    #: recoveries of a failure after a claim, by the line that names each (once per workflow)
    after_claim: set[str] = set()
    for line in sorted(lines, key=lambda line: line.sequence):
        request = str(line.payload.get("execution_request_id", ""))
        if line.kind in ("refusal_settlement", "readonly_observation_recovery"):
            after_claim.add(str(line.payload.get("recovery_id", "")))
        if not request or line.kind not in _PATH_KINDS:
            continue
        event = _EVENTS.get(line.kind) or line.payload.get("event", "")
        if line.kind == "worker_claimed":
            claimed.add(request)
        if event == "requeued_by_recovery" and (
            (ended.get(request) in UNCLAIMED_ENDS and request not in claimed)
            or (ended.get(request) == "failed" and line.payload.get("recovery_id") in after_claim)
        ):
            del ended[request]
        elif request in ended:
            anomalies.append(f"{run_id}: {request} {line.kind} at {line.sequence} after its end")
        if event in ENDS:
            ended[request] = event
    return anomalies


_EVENTS = {"request_failed": "failed", "reconciliation_settlement": "reconciled"}
_PATH_KINDS = frozenset({"worker_claimed", "request_event", *_EVENTS})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trusted-key", type=Path, required=True)
    parser.add_argument(
        "--verifier",
        default="forge-continuity-verify",
        help="the offline verifier's command line (split on spaces)",
    )
    parser.add_argument("history", type=Path, nargs="+", help="history files")
    parser.add_argument("--bundle", type=Path, action="append", default=[], required=True)
    args = parser.parse_args(argv)
    broken = verify_bundles(args.bundle, args.verifier.split(), args.trusted_key)
    if broken:
        print("\n".join(f"unverified: {b}" for b in broken))
        return 2
    journals = dict(read_bundle(bundle) for bundle in args.bundle)
    operations = [operation for path in args.history for operation in read_history(path)]
    anomalies = check(operations, journals)
    print(
        f"history check: {len(operations)} operations, {len(journals)} journals, "
        f"{len(anomalies)} anomalies"
    )
    for anomaly in anomalies:
        print(f"  {anomaly}")
    return 1 if anomalies else 0


if __name__ == "__main__":
    sys.exit(main())
