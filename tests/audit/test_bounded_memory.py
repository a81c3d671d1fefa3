"""Export and verification stay bounded in memory however long the journal: both stream, and
what they keep grows with the blobs, policies and admissions a run names, never with its entries.
Measured with tracemalloc (allocations, not time) on a short and an eight-times longer run."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import Engine

from forge_audit.verify import verify_file
from services.client import ContinuityClient
from services.ledger.domain.journal import EntryKind, seal
from services.ledger.domain.runs import RunSpec
from services.ledger.domain.signing import HeadSigner
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from services.ledger.transactions.base import LedgerContext, insert_entries
from shared.continuity.canonical import GENESIS_HASH, canonical_text
from tests.support import serve

SHORT, LONG = 1_000, 8_000
BATCH = 100  # entries per appending transaction (one signed head each)
# The same number of commands in both runs: the distinct command ids the verifier keeps are bounded
# by the run's command limit, not by its journal.
COMMANDS = 50


def seed_long_run(engine: Engine, signer: HeadSigner, run_id: str, entries: int) -> None:
    """A run of ``entries`` entries (the first :data:`COMMANDS` of every ten are commands, the
    rest tool intents), appended in batches of transactions, each entry signed as a ledger
    transaction signs it."""
    spec = RunSpec(
        run_id=run_id,
        task_id="task-1",
        attempt_id="attempt-1",
        source_revision="rev-abc",
        configuration_digest="sha256:" + "c" * 64,
        provider_timeout_seconds=900,
        active_deadline=None,
        command_limit=COMMANDS,
        time_budget_protocol="provider-timeout-v1",
        source_profile="profile-2026-11",
    )
    Ledger(engine, signer=signer).create_run(spec, "writer")
    context = LedgerContext(engine, signer=signer)
    head = (0, GENESIS_HASH)
    for start in range(0, entries, BATCH):
        batch = []
        for sequence in range(start + 1, min(start + BATCH, entries) + 1):
            command = sequence % 10 == 0 and sequence <= 10 * COMMANDS
            kind = EntryKind.COMMAND_EXECUTED if command else EntryKind.TOOL_INTENT
            payload = {"command_id" if command else "call_id": f"id-{sequence}"}
            text = canonical_text(payload)
            entry = seal(run_id, sequence, kind, text, head[1], "writer", context.now())
            batch.append(entry)
            head = (entry.sequence, entry.hash)
        with engine.begin() as connection:
            for entry in batch:
                insert_entries(context, connection, [entry])


def peak(action: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_export_and_verification_memory_does_not_grow_with_the_journal(
    engine: Engine, tmp_path: Path
) -> None:
    signer = HeadSigner.generate()
    seed_long_run(engine, signer, "short", SHORT)
    seed_long_run(engine, signer, "long", LONG)
    pinned = {signer.key_id: Ed25519PublicKey.from_public_bytes(signer.public_key)}
    peaks: dict[str, tuple[int, int]] = {}
    with (
        serve("ledger", bindings(Ledger(engine, signer=signer))) as served,
        ContinuityClient(
            "reader-token",
            ledger_target=served.target,
            candidate_target="127.0.0.1:1",
            admission_target="127.0.0.1:1",
        ) as client,
    ):
        for run_id in ("short", "long"):
            bundle = tmp_path / f"{run_id}.jsonl"
            exported = peak(partial(client.export_journal, run_id, bundle))
            verified = peak(partial(verify_file, bundle, pinned))
            peaks[run_id] = (exported, verified)
    lines = (tmp_path / "long.jsonl").read_bytes().splitlines()
    assert json.loads(lines[-1])["counts"]["entries"] == LONG
    assert verify_file(tmp_path / "long.jsonl", pinned).commands == COMMANDS
    (short_export, short_verify), (long_export, long_verify) = peaks["short"], peaks["long"]
    # eight times the entries: the peak may wobble, never scale with the journal
    assert long_export < 2 * short_export, peaks
    assert long_verify < 2 * short_verify, peaks
