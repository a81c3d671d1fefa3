"""What the machine checks besides the answers' codes: each call recorded in the history with
nothing written on refusal (:func:`checked_call`), the SQL samples of the invariants, and, after
each sequence, every run's audit bundle and the history handed to the independent checker
(tools/history_check.py), which has each bundle verified by forge-continuity-verify and reads
them against the history as a separate process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
from sqlalchemy import Engine, bindparam, text

from forge.continuity.v1 import execution_pb2
from services.client import ContinuityClient
from shared.contract.terms import PENDING_STATE_NAMES
from shared.runtime.errors import from_rpc_error
from tests.model.harness import ModelStack
from tests.model.history import History
from tests.model.spec_model import OK, Answer
from tests.support import row_counts

ROOT = Path(__file__).resolve().parents[2]
_PENDING = text(
    "SELECT execution_request_id FROM execution_requests WHERE state IN :states"
).bindparams(bindparam("states", value=list(PENDING_STATE_NAMES), expanding=True))
_TWO_TICKETS = text(
    "SELECT run_id, count(*) FROM admission_tickets WHERE run_id LIKE :prefix "
    "GROUP BY run_id HAVING count(*) > 1"
)


#: What a refusal that leaves a record may add: journal lines and the heads signed over them.
JOURNAL_TABLES = frozenset({"journal_entries", "signed_heads"})
Response = TypeVar("Response")


class Divergence(AssertionError):
    """The services answered or kept other than the spec requires."""


@dataclass
class Called:
    """A call's answer, as the model compares it, and the response on success."""

    answer: Answer
    response: Any = None
    #: Settled after an unknown outcome (``info``): a retry with the same key answered, or a
    #: read back found the write; a repeat's own fields (a command's ``charged``) may then say
    #: the first attempt applied it.
    settled: bool = False


def recorded_send(
    history: History,
    index: int,
    send: Callable[[], Response],
    acknowledged: Callable[[Response], dict[str, Any]],
    unknown: frozenset[str] = frozenset(),
) -> Called | None:
    """Send once and complete the history's operation ``index``: ``ok`` with what the caller
    acknowledged, ``fail`` with the code and reason, or ``info`` (None returned) for a code in
    ``unknown``, whose outcome the caller must settle."""
    try:
        response = send()
    except grpc.RpcError as error:
        code = error.code().name  # type: ignore[attr-defined]
        reason = from_rpc_error(error).reason
        if code in unknown:
            history.complete(index, "info", {"code": code, "reason": reason})
            return None
        history.complete(index, "fail", {"code": code, "reason": reason})
        return Called(Answer(code, reason))
    history.complete(index, "ok", acknowledged(response))
    return Called(OK, response)


def checked_call(
    engine: Engine,
    history: History,
    operation: tuple[str, str, dict[str, Any]],
    send: Callable[[], Response],
    acknowledged: Callable[[Response], dict[str, Any]],
    refusal_writes: Callable[[Answer], bool],
) -> Called:
    """Send one operation (process, name, value), recorded in the history. A refusal writes
    nothing, except where the spec says it leaves a record (``refusal_writes``): then only
    journal lines and their signed heads."""
    process, name, value = operation
    before = row_counts(engine)
    got = recorded_send(history, history.invoke(process, name, value), send, acknowledged)
    assert got is not None  # no code is unknown here
    if not got.answer.ok:
        code, reason = got.answer.code, got.answer.reason
        after = row_counts(engine)
        changed = {table for table in after if after[table] != before.get(table)}
        allowed = JOURNAL_TABLES if refusal_writes(got.answer) else frozenset()
        if changed - allowed:
            grown = {table: after[table] - before.get(table, 0) for table in changed}
            raise Divergence(f"{name} refused ({code} {reason}) but wrote {grown}")
    return got


def claim_acknowledged(response: execution_pb2.ClaimExecutionRequestResponse) -> dict[str, Any]:
    """What the history records of an acknowledged claim."""
    return {
        "lease_generation": response.execution_request.lease.generation,
        "journal_sequence": response.worker_claimed_entry.sequence,
    }


def pending_requests(engine: Engine) -> list[str]:
    """Every request stored queued or claimed (what the pending cap counts), read in SQL. The
    connection is closed before returning: an open SQLite read would hold the lock the ledger's
    writes wait on."""
    with engine.connect() as connection:
        return list(connection.execute(_PENDING).scalars())


def runs_with_two_tickets(engine: Engine, prefix: str) -> list[tuple[str, int]]:
    """The runs named ``prefix``-… holding more than one admission ticket (none, by the spec)."""
    with engine.connect() as connection:
        rows = connection.execute(_TWO_TICKETS, {"prefix": f"{prefix}-%"}).all()
    return [(str(run_id), int(count)) for run_id, count in rows]


def check_history(
    stack: ModelStack, history: Path, run_ids: Iterable[str], directory: Path
) -> subprocess.CompletedProcess[str]:
    """The checker's verdict on ``history`` and the bundles of ``run_ids`` (written to
    ``directory`` beside the ledgers' public key)."""
    client = ContinuityClient(
        "reader-token",
        ledger_target=stack.ledger.target,
        candidate_target=stack.candidate.target,
        admission_target=stack.admission.target,
    )
    bundles = []
    for run_id in sorted(run_ids):
        bundle = directory / f"{run_id}.audit.jsonl"
        client.export_journal(run_id, bundle)
        bundles.append(bundle)
    key = directory / "ledger-signing.pub.pem"
    if not key.exists():
        key.write_bytes(stack.signer.public_pem())
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "history_check.py"),
            "--trusted-key",
            str(key),
            "--verifier",
            f"{sys.executable} -m forge_audit.verify",
            str(history),
            *(argument for bundle in bundles for argument in ("--bundle", str(bundle))),
        ],
        capture_output=True,
        text=True,
        # the checker and the verifier import nothing of the project: only their own package
        env={**os.environ, "PYTHONPATH": str(ROOT / "tools" / "audit")},
        check=False,
    )
