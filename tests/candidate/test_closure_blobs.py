"""The closure blobs travel in the run snapshot: a candidate read of an eligible run makes one
ledger call (GetRunSnapshot) and no GetBlob, and gives the candidate it gives when the ledger is
an older one (no GetRunSnapshot, so the stream; no blobs in it, so it reads them apart). A
snapshot too large for one message is streamed, with the same candidate. A blob altered after it
was stored, or never stored, is held exactly as before. The ledger calls are counted by a real
client interceptor on the candidate's channel to the real ledger."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import pytest
from sqlalchemy import text

from forge.continuity.v1 import candidate_pb2, common_pb2, ledger_pb2
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings as candidate_bindings
from services.ledger.transactions import snapshot
from shared.continuity.canonical import sha256_digest
from shared.contract.channels import open_channel
from tests.candidate.conftest import NOW, Candidate, Stack, hold_pairs
from tests.support import Served, as_database_owner, serve

K = common_pb2.JournalEntryKind
NOT_STORED = "sha256:" + "ab" * 32


class LedgerCalls(
    grpc.UnaryUnaryClientInterceptor,  # type: ignore[type-arg]
    grpc.UnaryStreamClientInterceptor,  # type: ignore[type-arg]
):
    """Counts each ledger method the candidate calls and keeps the requests. With
    ``older_ledger`` the ledger answers as one that predates GetRunSnapshot and
    ``include_closure_blobs``: the one-message read goes to a method the real ledger does not
    serve (UNIMPLEMENTED), the stream is asked without blobs."""

    def __init__(self, *, older_ledger: bool = False) -> None:
        self.calls: Counter[str] = Counter()
        #: Every request sent, in order.
        self.requests: list[Any] = []
        self._older_ledger = older_ledger

    def _count(self, details: Any, request: Any) -> None:
        self.calls[str(details.method).rsplit("/", 1)[-1]] += 1
        self.requests.append(request)

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        self._count(details, request)
        if self._older_ledger and isinstance(request, ledger_pb2.GetRunSnapshotRequest):
            details = details._replace(method=f"{details.method}NotServedHere")
        return continuation(details, request)

    def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        self._count(details, request)
        if self._older_ledger and isinstance(request, ledger_pb2.ReadRunSnapshotRequest):
            request = ledger_pb2.ReadRunSnapshotRequest(run_id=request.run_id)
        return continuation(details, request)


@contextmanager
def counted_candidate(
    stack: Stack, *, older_ledger: bool = False, max_message_bytes: int = 32 * 1024 * 1024
) -> Iterator[tuple[Served, LedgerCalls]]:
    """A candidate server whose ledger calls go through a counting interceptor (and whose
    channel to the ledger receives messages of at most ``max_message_bytes``)."""
    counter = LedgerCalls(older_ledger=older_ledger)
    ledger_channel = open_channel(
        stack.ledger_served.target,
        "service-token",
        extra_interceptors=[counter],
        max_message_bytes=max_message_bytes,
    )
    reconstruction_channel = open_channel(
        stack.reconstruction_served.target, "candidate-service-token"
    )
    sources = GrpcCandidateSources(ledger_channel, reconstruction_channel)
    try:
        with serve("candidate", candidate_bindings(sources, clock=lambda: NOW)) as served:
            yield served, counter
    finally:
        ledger_channel.close()
        reconstruction_channel.close()


def read(stack: Stack, served: Served, run_id: str) -> Candidate:
    return stack.read(run_id, served=served)


def both_ways(stack: Stack, run_id: str) -> tuple[Candidate, Counter[str], Candidate, Counter[str]]:
    """The candidate and ledger calls with the snapshot's blobs, then with an older ledger."""
    with counted_candidate(stack) as (served, counter):
        prefetched = read(stack, served, run_id)
    with counted_candidate(stack, older_ledger=True) as (served, old_counter):
        apart = read(stack, served, run_id)
    return prefetched, counter.calls, apart, old_counter.calls


def test_an_eligible_read_makes_no_blob_call(stack: Stack) -> None:
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-e")
    prefetched, calls, apart, old_calls = both_ways(stack, "run-e")
    assert prefetched.eligible
    assert calls == Counter(GetRunSnapshot=1)
    assert old_calls == Counter(GetRunSnapshot=1, ReadRunSnapshot=1, GetBlob=2)
    assert prefetched == apart


def test_a_snapshot_too_large_for_one_message_is_streamed(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger refuses the one-message read (RUN_SNAPSHOT_TOO_LARGE: here its byte limit is
    lowered under the run's closure blobs); the candidate streams the snapshot and gives the same
    candidate."""
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-l")
    with counted_candidate(stack) as (served, counter):
        one_message = read(stack, served, "run-l")
    monkeypatch.setattr(snapshot, "WHOLE_SNAPSHOT_BYTES", 1024)
    with counted_candidate(stack) as (served, large_counter):
        streamed = read(stack, served, "run-l")
    assert counter.calls == Counter(GetRunSnapshot=1)
    assert large_counter.calls == Counter(GetRunSnapshot=1, ReadRunSnapshot=1)
    assert streamed == one_message and streamed.eligible


def test_a_snapshot_over_the_receivers_message_limit_is_streamed(stack: Stack) -> None:
    """The candidate's channel receives smaller messages than the whole snapshot (but each of the
    stream's): gRPC refuses the one message RESOURCE_EXHAUSTED, and the stream reads the run."""
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-r")
    with counted_candidate(stack) as (served, counter):
        one_message = read(stack, served, "run-r")
    whole = stack.ledger().GetRunSnapshot(
        ledger_pb2.GetRunSnapshotRequest(run_id="run-r", include_closure_blobs=True)
    )
    parts = stack.ledger().ReadRunSnapshot(
        ledger_pb2.ReadRunSnapshotRequest(run_id="run-r", include_closure_blobs=True)
    )
    largest_part = max(part.ByteSize() for part in parts)
    assert largest_part < whole.ByteSize()
    with counted_candidate(stack, max_message_bytes=largest_part + 64) as (served, small):
        streamed = read(stack, served, "run-r")
    assert counter.calls == Counter(GetRunSnapshot=1)
    assert small.calls == Counter(GetRunSnapshot=1, ReadRunSnapshot=1)
    assert streamed == one_message and streamed.eligible


def test_admission_inputs_are_the_derived_checkpoint_alone(stack: Stack) -> None:
    """With the admission's inputs the read still makes one ledger call, and returns only the
    derived checkpoint the proof names, not the closure blobs it was reconstructed from."""
    stack.set_policy(enabled=True)
    stack.seed("v1_basic", "run-a")
    with counted_candidate(stack) as (served, counter):
        found = stack.candidates(served=served).GetInvalidReadContinuityCandidate(
            candidate_pb2.GetInvalidReadContinuityCandidateRequest(
                run_id="run-a", include_admission_inputs=True
            )
        )
    assert counter.calls == Counter(GetRunSnapshot=1)
    inputs, proof = found.admission_inputs, found.candidate.proof
    assert sha256_digest(inputs.derived_checkpoint) == proof.derived_checkpoint_digest
    assert proof.derived_checkpoint_digest not in (proof.checkpoint_digest, "")
    assert {described.name for described, _ in inputs.ListFields()} == {
        "derived_checkpoint",
        "derived_checkpoint_digest",
        "witness_digest",
    }


@pytest.mark.parametrize("which", ["checkpoint", "response"])
def test_a_blob_altered_after_it_was_stored_is_held_as_before(stack: Stack, which: str) -> None:
    """The snapshot sends the altered bytes; they fail the digest check, the candidate reads the
    blob apart (the same altered bytes) and is held for it exactly as without the snapshot."""
    stack.set_policy(enabled=True)
    seeded = stack.seed("v1_basic", "run-x")
    digest = seeded.checkpoint_digest if which == "checkpoint" else seeded.response_digest
    with as_database_owner(stack.engine) as connection:
        connection.execute(
            text("UPDATE blobs SET content = :c WHERE digest = :d"),
            {"c": b'{"altered":true}', "d": digest},
        )
    prefetched, calls, apart, old_calls = both_ways(stack, "run-x")
    assert not prefetched.eligible
    assert ("CLOSURE_INCOMPLETE", digest) in hold_pairs(prefetched)
    assert calls == Counter(GetRunSnapshot=1, GetBlob=1)
    assert old_calls == Counter(GetRunSnapshot=1, ReadRunSnapshot=1, GetBlob=2)
    assert prefetched == apart


def test_a_blob_never_stored_is_held_as_before(stack: Stack) -> None:
    stack.set_policy(enabled=True)

    def unstored(entries: list[Any]) -> list[Any]:
        return [
            (k, {**p, "response_digest": NOT_STORED})
            if k == K.JOURNAL_ENTRY_KIND_RESPONSE_CONSUMED
            else (k, p)
            for k, p in entries
        ]

    stack.seed("v1_basic", "run-m", edit=unstored)
    prefetched, calls, apart, old_calls = both_ways(stack, "run-m")
    assert hold_pairs(prefetched) == {("CLOSURE_INCOMPLETE", NOT_STORED)}
    assert calls == Counter(GetRunSnapshot=1, GetBlob=1)
    assert old_calls == Counter(GetRunSnapshot=1, ReadRunSnapshot=1, GetBlob=2)
    assert prefetched == apart
