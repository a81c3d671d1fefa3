"""The real runs the conformance vectors start from: the real ledger, candidate, admission and
reconstruction services in-process on loopback, over a temporary SQLite ledger with a fixed
clock and a fixed test signing key, each run written through the services' public RPCs and
exported by the real exporter (services/client/audit.py).

Nothing here is random: the clock never moves, the keys are derived from fixed seeds, and the
ids are the ones the services derive from their inputs; two generations write the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import services.client.audit as audit_export
from forge.continuity.v1 import (
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    ledger_pb2,
    ledger_pb2_grpc,
)
from services.admission.servicer import bindings as admission_bindings
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings as candidate_bindings
from services.client import ContinuityClient
from services.client.heads import HeadsFile
from services.demo.seed import (
    CONFIGURATION_DIGEST,
    TIME_BUDGET_PROTOCOL,
    load_fixture,
    seed_held_run,
)
from services.ledger.database import make_engine, migrate
from services.ledger.domain.signing import HeadSigner
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from services.ledger.unsigned_prefix import declare
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.continuity.canonical import digest_of
from shared.continuity.qualification import DEFAULT_QUALIFIED_PROFILE
from shared.continuity.timeutil import to_text
from shared.contract.channels import open_channel
from tests.admission.conftest import Stack, submission
from tests.support import Served, admission_downstream, serve, token_roles

K = common_pb2.JournalEntryKind
#: The one moment of every generation: each recorded_at, signed_at and exported_at.
NOW = datetime(2026, 12, 2, 15, 48, 52, 402625, tzinfo=UTC)
NOW_TEXT = to_text(NOW)
SOURCE_REVISION = "git:4f1c2a9"
#: The blobs of the small run: short stand-ins for a checkpoint and a provider response.
SMALL_CHECKPOINT = b'{"checkpoint":"a short stand-in for a stored checkpoint"}'
SMALL_RESPONSE = b'{"response":"a short stand-in for a raw provider response"}'


def fixed_clock() -> datetime:
    return NOW


def test_key(name: str) -> Ed25519PrivateKey:
    """A test signing key derived from a public seed: anyone can derive its private half, so it
    proves nothing outside this suite. Never a real key."""
    seed = hashlib.sha256(f"forge.continuity audit-bundle/1 conformance: {name}".encode()).digest()
    return Ed25519PrivateKey.from_private_bytes(seed)


@dataclass
class RealRuns:
    """What the services wrote: each run's exported bundle, the published keys and the heads
    a monitor recorded."""

    bundles: dict[str, bytes] = field(default_factory=dict)
    signing_keys: dict[str, Any] = field(default_factory=dict)
    public_pem: bytes = b""
    public_raw: bytes = b""
    #: heads file after the first pass over the head feed, and after the small run grew
    witnessed: bytes = b""
    witnessed_later: bytes = b""


@contextmanager
def _stack(ledger: Ledger) -> Iterator[Stack]:
    """The four services over ``ledger``, as tests/admission/conftest.py starts them, with the
    candidate service on the fixed clock too."""
    with (
        serve("ledger", ledger_bindings(ledger), max_message_bytes=32 * 1024 * 1024) as served,
        serve("reconstruction", reconstruction_bindings()) as reconstruction,
    ):
        sources = GrpcCandidateSources(
            open_channel(served.target, "service-token"),
            open_channel(reconstruction.target, "candidate-service-token"),
        )
        with serve("candidate", candidate_bindings(sources, clock=fixed_clock)) as candidate:
            downstream = admission_downstream(served.target, candidate.target)
            with serve("admission", admission_bindings(downstream)) as admission:
                yield Stack(served, candidate, admission)


def _client(ledger: Served) -> ContinuityClient:
    """A reader's client; exports and the head feed call the ledger alone."""
    target = ledger.target
    return ContinuityClient(
        "reader-token", ledger_target=target, candidate_target=target, admission_target=target
    )


def _writer(ledger: Served) -> ledger_pb2_grpc.LedgerServiceStub:
    return ledger_pb2_grpc.LedgerServiceStub(ledger.channel("writer-token"))


def _append(ledger: Served, run_id: str, kind: int, payload: dict[str, Any]) -> str:
    """Append as the platform writer, at the run's current head."""
    stub = _writer(ledger)
    head = stub.GetRun(ledger_pb2.GetRunRequest(run_id=run_id)).head.hash
    return stub.AppendJournalEntry(
        ledger_pb2.AppendJournalEntryRequest(
            run_id=run_id,
            expected_head_hash=head,
            kind=kind,  # type: ignore[arg-type]
            payload_json=json.dumps(payload),
        )
    ).entry.hash


def _create(ledger: Served, run_id: str, command_limit: int) -> None:
    _writer(ledger).CreateRun(
        ledger_pb2.CreateRunRequest(
            run_id=run_id,
            task_id=f"{run_id}-task",
            attempt_id=f"{run_id}-attempt-1",
            source_revision=SOURCE_REVISION,
            configuration_digest=CONFIGURATION_DIGEST,
            provider_timeout_seconds=900,
            command_limit=command_limit,
            time_budget_protocol=TIME_BUDGET_PROTOCOL,
            source_profile=DEFAULT_QUALIFIED_PROFILE,
        )
    )


def _run_started(run_id: str) -> dict[str, Any]:
    return {
        "task_id": f"{run_id}-task",
        "attempt_id": f"{run_id}-attempt-1",
        "source_revision": SOURCE_REVISION,
        "configuration_digest": CONFIGURATION_DIGEST,
    }


def small_run(ledger: Served, run_id: str = "run-small") -> None:
    """Five entries, two stored blobs and the configuration the ledger does not store; both
    of the run's two commands charged."""
    _create(ledger, run_id, command_limit=2)
    stub = _writer(ledger)
    checkpoint = stub.PutBlob(
        ledger_pb2.PutBlobRequest(content=SMALL_CHECKPOINT, media_type="application/json")
    ).digest
    response = stub.PutBlob(
        ledger_pb2.PutBlobRequest(content=SMALL_RESPONSE, media_type="application/json")
    ).digest
    _append(ledger, run_id, K.JOURNAL_ENTRY_KIND_RUN_STARTED, _run_started(run_id))
    _append(
        ledger, run_id, K.JOURNAL_ENTRY_KIND_CHECKPOINT_STORED, {"checkpoint_digest": checkpoint}
    )
    for n in (1, 2):
        command = {
            "command_id": f"cmd-0{n}",
            "command_digest": digest_of({"argv": ["make", str(n)]}),
        }
        _append(ledger, run_id, K.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED, command)
    consumed = {
        "request_id": "model-request-1",
        "response_digest": response,
        "consumed_at": "2026-12-02T15:40:00Z",
    }
    _append(ledger, run_id, K.JOURNAL_ENTRY_KIND_RESPONSE_CONSUMED, consumed)


def admitted_run(stack: Stack, run_id: str = "run-admitted") -> None:
    """A held run seeded as the platform writes it (one command used before the hold), admitted
    by an operator, claimed by a worker that charges one command, and completed
    (tests/audit/conftest.py ``live_run``, with a shorter history)."""
    seed_held_run(stack.ledger_stub(), load_fixture("v1_basic"), run_id, commands_before=1)
    stack.set_policy()
    candidate = stack.candidate_of(run_id)
    if not candidate.eligible:
        raise RuntimeError(f"{run_id} is not eligible: {candidate.holds}")
    ticket = stack.admissions().RequestInvalidReadContinuity(submission(candidate)).ticket
    exr = ticket.execution_request.execution_request_id
    run = stack.ledger_stub("reader-token").GetRun(ledger_pb2.GetRunRequest(run_id=run_id)).run
    worker = execution_pb2_grpc.ExecutionServiceStub(stack.ledger.channel("worker-token"))
    claimed = worker.ClaimExecutionRequest(
        execution_pb2.ClaimExecutionRequestRequest(
            execution_request_id=exr,
            attempt_id=run.attempt_id,
            source_revision=run.source_revision,
            configuration_digest=CONFIGURATION_DIGEST,
            source_profile=DEFAULT_QUALIFIED_PROFILE,
        )
    ).execution_request
    generation = claimed.lease.generation
    worker.RecordCommand(
        execution_pb2.RecordCommandRequest(
            execution_request_id=exr,
            lease_generation=generation,
            command_id="cmd-after-admission",
            command_digest=digest_of({"argv": ["make", "check"]}),
        )
    )
    worker.CompleteExecutionRequest(
        execution_pb2.CompleteExecutionRequestRequest(
            execution_request_id=exr, lease_generation=generation
        )
    )


def _export(ledger: Served, run_id: str, workdir: Path) -> bytes:
    path = workdir / f"{run_id}.audit.jsonl"
    # the manifest's exported_at is the fixed moment too
    with mock.patch.object(audit_export, "utc_now", fixed_clock), _client(ledger) as reader:
        reader.export_journal(run_id, path)
    return path.read_bytes()


def _watch(ledger: Served, heads: Path) -> None:
    with _client(ledger) as monitor:
        found = monitor.watch_heads_once(HeadsFile(heads))
    if found.alarms:
        raise RuntimeError(f"the monitor raised alarms: {found.alarms}")


def generate_real_runs(workdir: Path, signing_key: Ed25519PrivateKey) -> RealRuns:
    """Write the runs through the services and export them."""
    url = f"sqlite:///{workdir}/ledger.db"
    migrate(url)
    engine = make_engine(url)
    real = RealRuns()
    try:
        # A run whose first entries a ledger without a key wrote, declared a pre-signing prefix
        # by an operator (python -m services.ledger.unsigned_prefix), then signed from there on.
        unsigned = Ledger(engine, fixed_clock, authority=token_roles)
        with serve("ledger", ledger_bindings(unsigned)) as before_signing:
            _create(before_signing, "run-presigned", command_limit=2)
            _append(before_signing, "run-presigned", K.JOURNAL_ENTRY_KIND_RUN_STARTED,
                    _run_started("run-presigned"))  # fmt: skip
            _append(before_signing, "run-presigned", K.JOURNAL_ENTRY_KIND_TOOL_INTENT,
                    {"call_id": "call-before-signing"})  # fmt: skip
        with engine.begin() as connection:
            declare(connection, "run-presigned", None, "conformance-operator")
        signer = HeadSigner(signing_key)
        ledger = Ledger(engine, fixed_clock, authority=token_roles, signer=signer)
        with _stack(ledger) as stack:
            outcome = {"call_id": "call-before-signing", "status": "failed", "reason": "stopped"}
            _append(stack.ledger, "run-presigned", K.JOURNAL_ENTRY_KIND_TOOL_OUTCOME, outcome)
            _append(stack.ledger, "run-presigned", K.JOURNAL_ENTRY_KIND_TOOL_INTENT,
                    {"call_id": "call-after-signing"})  # fmt: skip
            small_run(stack.ledger)
            _create(stack.ledger, "run-empty", command_limit=2)
            admitted_run(stack)
            for run_id in ("run-small", "run-empty", "run-admitted", "run-presigned"):
                real.bundles[run_id] = _export(stack.ledger, run_id, workdir)
            with _client(stack.ledger) as reader:
                real.signing_keys = reader.signing_keys_document()
            heads = workdir / "heads.jsonl"
            _watch(stack.ledger, heads)
            real.witnessed = heads.read_bytes()
            # the small run grows after its export; the monitor sees the later head
            for call in ("after-the-export-1", "after-the-export-2"):
                _append(stack.ledger, "run-small", K.JOURNAL_ENTRY_KIND_TOOL_INTENT,
                        {"call_id": call})  # fmt: skip
            _watch(stack.ledger, heads)
            real.witnessed_later = heads.read_bytes()
        real.public_pem = signer.public_pem()
        real.public_raw = signer.public_key
    finally:
        engine.dispose()
    return real


def public_key_b64(raw: bytes) -> bytes:
    return base64.b64encode(raw) + b"\n"
