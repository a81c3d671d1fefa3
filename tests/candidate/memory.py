"""In-memory candidate sources: a correctly chained held-run journal, its blobs, and a scripted
reconstruction (an analysis or refusal, a reconstruction or refusal), with every read counted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from services.candidate.domain import (
    AnalysisFinding,
    CandidateEvaluator,
    ChainVerification,
    ConsumedCall,
    Entry,
    ExecutionRecord,
    JournalHead,
    PendingReproduction,
    PolicyRecord,
    Reconstruction,
    ResponseAnalysis,
    RunRecord,
)
from shared.continuity.canonical import GENESIS_HASH, canonical_text, digest_of, sha256_digest
from shared.continuity.journal_chain import entry_hash
from shared.runtime.errors import DomainError

CHECKPOINT = b'{"checkpoint":1}'
RESPONSE = b'{"choices":[]}'
CHECKPOINT_DIGEST = sha256_digest(CHECKPOINT)
RESPONSE_DIGEST = sha256_digest(RESPONSE)
EVIDENCE_CALL = "call_ev_1"
RUN = RunRecord(
    run_id="run-1",
    task_id="task-1",
    attempt_id="attempt-1",
    source_revision="git:1",
    configuration_digest="sha256:" + "c" * 64,
    provider_timeout_seconds=900,
    active_deadline=None,
    command_limit=22,
    time_budget_protocol="provider-timeout-v1",
    source_profile="profile",
    run_digest="sha256:" + "d" * 64,
)


def call_args_digest(call_id: str) -> str:
    """The argument digest the journal's grant of ``call_id`` records, and the analysis parses."""
    return digest_of({"call": call_id})


ANALYSIS = ResponseAnalysis(
    tool_calls=(
        ConsumedCall(EVIDENCE_CALL, "read_run_evidence", "read", call_args_digest(EVIDENCE_CALL)),
    ),
    evidence_call_id=EVIDENCE_CALL,
    evidence_query_json='{"kind":"x"}',
    accepted_by_advertised_schema=True,
    rejected_by_pinned_validator=True,
    validator_error="invalid",
    runtime_identity_json='{"sdk":"2.58.0"}',
    validator_identity="sha256:" + "f" * 64,
    common_holds=(),
    v1_holds=(),
    v2_holds=(),
)
POLICY = PolicyRecord(1, True, "sha256:" + "e" * 64, True)
RECONSTRUCTION = Reconstruction("sha256:" + "1" * 64, "sha256:" + "2" * 64)

Payload = dict[str, Any]


def held_journal(
    grants: Sequence[tuple[str, str]] = ((EVIDENCE_CALL, "read_run_evidence"),),
    response_digest: str = RESPONSE_DIGEST,
) -> list[tuple[str, Payload]]:
    """run_started … run_held of RUN, with the given (call_id, tool_name) grants."""
    return [
        (
            "run_started",
            {
                "task_id": RUN.task_id,
                "attempt_id": RUN.attempt_id,
                "source_revision": RUN.source_revision,
                "configuration_digest": RUN.configuration_digest,
            },
        ),
        ("checkpoint_stored", {"checkpoint_digest": CHECKPOINT_DIGEST}),
        ("model_request_sent", {"request_id": "req-1", "checkpoint_digest": CHECKPOINT_DIGEST}),
        (
            "response_consumed",
            {
                "request_id": "req-1",
                "response_digest": response_digest,
                "consumed_at": "2026-10-20T10:01:00.000000Z",
            },
        ),
        *[
            (
                "tool_call_granted",
                {
                    "call_id": c,
                    "tool_name": t,
                    "args_digest": call_args_digest(c),
                    "grant": "read" if t != "run_command" else "command",
                    "source_cut": RUN.source_revision,
                },
            )
            for c, t in grants
        ],
        ("run_held", {"call_id": EVIDENCE_CALL}),
    ]


def chained(journal: Sequence[tuple[str, Payload]]) -> list[Entry]:
    entries: list[Entry] = []
    prev = GENESIS_HASH
    for sequence, (kind, payload) in enumerate(journal, start=1):
        recorded_at = f"2026-10-20T10:00:{sequence:02d}.000000Z"
        digest = entry_hash(
            run_id=RUN.run_id,
            sequence=sequence,
            kind=kind,
            payload=payload,
            prev_hash=prev,
            actor="writer",
            recorded_at=recorded_at,
        )
        entries.append(
            Entry(
                RUN.run_id,
                sequence,
                kind,
                canonical_text(payload),
                prev,
                digest,
                "writer",
                recorded_at,
            )
        )
        prev = digest
    return entries


@dataclass
class MemorySources:
    """:class:`CandidateSources` over memory; ``analysis`` / ``reconstruction`` may be errors."""

    journal_entries: list[Entry] = field(default_factory=lambda: chained(held_journal()))
    blobs: dict[str, bytes] = field(
        default_factory=lambda: {CHECKPOINT_DIGEST: CHECKPOINT, RESPONSE_DIGEST: RESPONSE}
    )
    analysis: ResponseAnalysis | DomainError = ANALYSIS
    reconstruction: Reconstruction | DomainError = RECONSTRUCTION
    policy_record: PolicyRecord = POLICY
    run_record: RunRecord = RUN
    reads: Counter[str] = field(default_factory=Counter)

    def _head(self) -> JournalHead:
        last = self.journal_entries[-1] if self.journal_entries else None
        return JournalHead(last.sequence, last.hash) if last else JournalHead(0, GENESIS_HASH)

    def run(self, run_id: str) -> tuple[RunRecord, JournalHead]:
        self.reads["run"] += 1
        return self.run_record, self._head()

    def journal(self, run_id: str) -> tuple[Sequence[Entry], JournalHead]:
        self.reads["journal"] += 1
        return list(self.journal_entries), self._head()

    def verify(self, run_id: str) -> ChainVerification:
        self.reads["verify"] += 1
        return ChainVerification(True, 0, "", self._head())

    def policy(self) -> PolicyRecord:
        self.reads["policy"] += 1
        return self.policy_record

    def execution_requests(self, run_id: str) -> Sequence[ExecutionRecord]:
        self.reads["execution_requests"] += 1
        return []

    def blob(self, digest: str) -> bytes | None:
        self.reads["blob"] += 1
        return self.blobs.get(digest)

    def analyze(self, checkpoint: bytes, raw_response: bytes) -> ResponseAnalysis:
        self.reads["analyze"] += 1
        if isinstance(self.analysis, DomainError):
            raise self.analysis
        return self.analysis

    def reconstruct(
        self, checkpoint: bytes, raw_response: bytes, version: int, consumed_at: str
    ) -> Reconstruction:
        self.reads["reconstruct"] += 1
        if isinstance(self.reconstruction, DomainError):
            raise self.reconstruction
        return self.reconstruction

    def reconstruct_observation(
        self,
        derived_checkpoint: bytes,
        raw_response: bytes,
        consumed_at: str,
        retained_results: Mapping[str, str],
    ) -> Reconstruction:
        # Only the read-only observation recovery reconstructs a consumed continuation turn.
        raise AssertionError("the invalid-read candidate does not reconstruct an observation")

    def reproduce_pending(self, derived_checkpoint: bytes) -> PendingReproduction:
        # The held-run candidate never reproduces; only the rejected-boundary recovery does.
        raise AssertionError("the invalid-read candidate does not reproduce a pending request")


def with_finding(reason: str, element: str = EVIDENCE_CALL) -> ResponseAnalysis:
    """The analysis with one common finding."""
    return replace(ANALYSIS, common_holds=(AnalysisFinding(reason, element, "found"),))


def evaluator(sources: MemorySources) -> CandidateEvaluator:
    """An evaluator over ``sources`` whose profile is qualified, at a fixed time."""
    return CandidateEvaluator(
        sources, clock=lambda: datetime(2026, 10, 20, 12, tzinfo=UTC), qualified=lambda _: True
    )
