"""Evaluating the invalid-read continuity candidate of a held run.

Read-only: everything comes from :class:`CandidateSources`; nothing is written and no claim is
created. Every condition is evaluated and every hold that applies is reported together. Only an
unknown run (or an unavailable dependency) is an error; everything else is a candidate, eligible
or held.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from shared.canonical import CanonicalJsonError, digest_of, is_digest, parse_json, sha256_digest
from shared.errors import Aborted, DomainError, FailedPrecondition, Internal, InvalidArgument
from shared.qualification import is_qualified
from shared.timeutil import utc_now

from .handoff import build_handoff
from .journal import (
    RUN_HELD,
    RUN_STARTED,
    TOOL_CALL_GRANTED,
    TOOL_OUTCOME,
    Closure,
    check_chain,
    closure_of,
    custody_rows,
)
from .model import (
    OUTSTANDING_STATES,
    Candidate,
    ChainVerification,
    ConsumedCall,
    Digests,
    Entry,
    ExecutionRecord,
    Hold,
    HoldReason,
    JournalHead,
    PolicyRecord,
    Proof,
    Qualification,
    Reconstruction,
    ResponseAnalysis,
    RunRecord,
    hold,
)
from .sources import CandidateSources

SUPPORTED_VERSIONS: Final = (1, 2)
SUPPORTED_TIME_BUDGET_PROTOCOL: Final = "provider-timeout-v1"
EVIDENCE_TOOL: Final = "read_run_evidence"
READ_GRANT: Final = "read"
CANDIDATE_KIND: Final = "forge.continuity.v1.InvalidReadContinuityCandidate"
MAX_READ_ATTEMPTS: Final = 3

# Reconstruction's analysis reasons (common and per version) → the contract's hold reasons.
ANALYSIS_REASONS: Final[dict[str, HoldReason]] = {
    "EVIDENCE_QUERY_VALID": HoldReason.QUERY_VALID,
    "EVIDENCE_QUERY_NOT_ADVERTISED": HoldReason.QUERY_NOT_ADVERTISED,
    "SIBLING_CALL_REFUSED": HoldReason.SIBLING_CALL,
    "UNKNOWN_TOOL_CALL": HoldReason.UNKNOWN_OR_WRITABLE_CALL,
    "UNSUPPORTED_RESPONSE_CONTENT": HoldReason.UNSUPPORTED_CONTENT,
    "EVIDENCE_CALL_COUNT": HoldReason.UNSUPPORTED_CONTENT,
    "DUPLICATE_TOOL_CALL_ID": HoldReason.UNSUPPORTED_CONTENT,
    "CONSUMED_RESPONSE_UNPARSEABLE": HoldReason.UNSUPPORTED_CONTENT,
}
IDENTITY_REASONS: Final = frozenset({"HISTORICAL_IDENTITY_UNREGISTERED"})
CLOSURE_REASONS: Final = frozenset({"CONSUMED_AT_INVALID"})


@dataclass(frozen=True)
class Snapshot:
    """One consistent read of the run, its whole journal and the ledger's verification."""

    run: RunRecord
    head: JournalHead
    entries: tuple[Entry, ...]
    verification: ChainVerification


def read_snapshot(sources: CandidateSources, run_id: str) -> Snapshot:
    """Read run, journal and verification until all three describe the same head."""
    for _ in range(MAX_READ_ATTEMPTS):
        run, head = sources.run(run_id)
        entries, read_head = sources.journal(run_id)
        verification = sources.verify(run_id)
        if read_head == head and (not verification.valid or verification.head == head):
            return Snapshot(run, head, tuple(entries), verification)
    raise Aborted(
        "JOURNAL_CHANGED_DURING_READ",
        f"the journal of {run_id} kept changing while the candidate was read; read it again",
        metadata={"run_id": run_id},
    )


class CandidateEvaluator:
    """Computes candidates from read-only sources."""

    def __init__(
        self,
        sources: CandidateSources,
        *,
        clock: Callable[[], datetime] = utc_now,
        qualified: Callable[[str], bool] = is_qualified,
    ) -> None:
        self._sources = sources
        self._clock = clock
        self._qualified = qualified

    def invalid_read_continuity(self, run_id: str, version: int = 1) -> Candidate:
        """The candidate of ``run_id`` under continuity ``version`` (1; 2 is prepared)."""
        if version not in SUPPORTED_VERSIONS:
            raise InvalidArgument(
                "VERSION_UNSUPPORTED",
                f"continuity version {version} is not 1 or 2",
                metadata={"field": "version"},
            )
        sources = self._sources
        snapshot = read_snapshot(sources, run_id)
        policy = sources.policy()
        executions = sources.execution_requests(run_id)
        return _Evaluation(
            sources, snapshot, policy, executions, version, self._qualified, self._clock()
        ).candidate()


class _Evaluation:
    """One evaluation; collects every hold that applies."""

    def __init__(
        self,
        sources: CandidateSources,
        snapshot: Snapshot,
        policy: PolicyRecord,
        executions: Sequence[ExecutionRecord],
        version: int,
        qualified: Callable[[str], bool],
        now: datetime,
    ) -> None:
        self.sources = sources
        self.snapshot = snapshot
        self.run = snapshot.run
        self.entries = snapshot.entries
        self.policy = policy
        self.executions = executions
        self.version = version
        self.qualified = qualified(snapshot.run.source_profile)
        self.now = now
        self.holds: list[Hold] = []
        self.closure: Closure = closure_of(self.entries)
        last = self.entries[-1] if self.entries else None
        self.final_held = last if last is not None and last.kind == RUN_HELD else None
        self.checkpoint: bytes | None = None
        self.response: bytes | None = None
        self.analysis: ResponseAnalysis | None = None
        self.calls: tuple[ConsumedCall, ...] | None = None
        self.reconstruction: Reconstruction | None = None

    # --- the checks ---------------------------------------------------------------------------

    def candidate(self) -> Candidate:
        self._chain()
        self._held_state()
        self._origin()
        self._closure()
        analysis_holds = self._analysis()
        self._after_consume()
        self._unknown_outcomes()
        self._error_message_only()
        self._current_checks()
        self.holds += analysis_holds
        if not analysis_holds and self.analysis is not None:
            self._reconstruct()
        return self._assemble()

    def _chain(self) -> None:
        breaks: list[tuple[int, str]] = []
        verification = self.snapshot.verification
        if not verification.valid:
            breaks.append((verification.first_broken_sequence, verification.problem))
        local = check_chain(self.entries, self.snapshot.head)
        if local is not None:
            breaks.append((local.sequence, local.problem))
        if breaks:
            sequence, problem = min(breaks)
            self.holds.append(
                hold(
                    HoldReason.JOURNAL_CHAIN_BROKEN,
                    str(sequence),
                    f"the journal chain breaks at sequence {sequence} ({problem or 'unverified'})",
                )
            )

    def _held_state(self) -> None:
        if self.final_held is None:
            last = self.entries[-1] if self.entries else None
            self.holds.append(
                hold(
                    HoldReason.RUN_NOT_HELD,
                    str(last.sequence if last else 0),
                    f"the last journal entry is {last.kind if last else 'absent'}, not run_held",
                )
            )

    def _origin(self) -> None:
        run = self.run
        starts = [e for e in self.entries if e.kind == RUN_STARTED]
        if not starts:
            self.holds.append(
                hold(
                    HoldReason.ATTEMPT_MISMATCH,
                    RUN_STARTED,
                    "the journal has no run_started entry: the original task attempt is unproven",
                )
            )
        for start in starts:
            found = (start.text("task_id"), start.text("attempt_id"))
            if found != (run.task_id, run.attempt_id):
                self.holds.append(
                    hold(
                        HoldReason.ATTEMPT_MISMATCH,
                        str(start.sequence),
                        f"run_started at sequence {start.sequence} names task {found[0]!r} "
                        f"attempt {found[1]!r}, not the run's task {run.task_id!r} "
                        f"attempt {run.attempt_id!r}",
                    )
                )
            for name, expected in (
                ("source_revision", run.source_revision),
                ("configuration_digest", run.configuration_digest),
            ):
                if start.text(name) != expected:
                    self.holds.append(
                        hold(
                            HoldReason.SOURCE_OR_CONFIGURATION_CHANGED,
                            name,
                            f"run_started at sequence {start.sequence} records {name} "
                            f"{start.text(name)!r}, the run is registered with {expected!r}",
                        )
                    )

    def _closure(self) -> None:
        closure = self.closure
        if closure.request is None:
            self.holds.append(
                hold(
                    HoldReason.CLOSURE_INCOMPLETE,
                    "model_request_sent",
                    "the journal records no model request",
                )
            )
            return
        if closure.consume is None:
            self.holds.append(
                hold(
                    HoldReason.CONSUME_MISSING,
                    closure.request_id,
                    f"model request {closure.request_id!r} (sequence {closure.request.sequence}) "
                    "is not followed by its response_consumed",
                )
            )
        if closure.checkpoint_stored is None:
            self.holds.append(
                hold(
                    HoldReason.CLOSURE_INCOMPLETE,
                    closure.checkpoint_digest or str(closure.request.sequence),
                    f"no checkpoint_stored of {closure.checkpoint_digest or '(none)'} precedes "
                    f"model request {closure.request_id!r}",
                )
            )
        self.checkpoint = self._blob(closure.checkpoint_digest, "checkpoint")
        if closure.consume is not None:
            self.response = self._blob(closure.response_digest, "consumed response")
            if self.response is not None:
                self.calls = _raw_tool_calls(self.response)
            if not closure.consumed_at:
                self.holds.append(
                    hold(
                        HoldReason.CLOSURE_INCOMPLETE,
                        str(closure.consume.sequence),
                        "response_consumed does not record its consumption time (consumed_at)",
                    )
                )

    def _blob(self, digest: str, what: str) -> bytes | None:
        content = self.sources.blob(digest) if is_digest(digest) else None
        if content is not None and sha256_digest(content) == digest:
            return content
        self.holds.append(
            hold(
                HoldReason.CLOSURE_INCOMPLETE,
                digest or what,
                f"the {what} blob {digest or '(none)'} named in the journal is not stored intact",
            )
        )
        return None

    def _analysis(self) -> list[Hold]:
        if self.checkpoint is None or self.response is None:
            return []
        try:
            analysis = self.sources.analyze(self.checkpoint, self.response)
        except (FailedPrecondition, InvalidArgument) as error:
            return [self._refusal(error)]
        self.analysis = analysis
        self.calls = analysis.tool_calls
        return [self._finding(f.reason, f.element, f.message) for f in analysis.holds(self.version)]

    def _finding(self, reason: str, element: str, message: str) -> Hold:
        mapped = ANALYSIS_REASONS.get(reason, HoldReason.UNSUPPORTED_CONTENT)
        if mapped is HoldReason.SIBLING_CALL:
            grant = next((c.grant for c in self.calls or () if c.call_id == element), "")
            if grant != READ_GRANT:
                # A refused sibling that is not a pure read is a writable / command call.
                mapped = HoldReason.UNKNOWN_OR_WRITABLE_CALL
        return hold(mapped, element, f"{reason}: {message}")

    def _refusal(self, error: DomainError) -> Hold:
        subject = (
            error.metadata.get("field")
            or error.metadata.get("element")
            or self.closure.response_digest
        )
        if error.reason in IDENTITY_REASONS:
            return hold(
                HoldReason.IDENTITY_UNREGISTERED, subject, f"{error.reason}: {error.message}"
            )
        if error.reason in ANALYSIS_REASONS:
            return self._finding(error.reason, subject, error.message)
        if error.reason in CLOSURE_REASONS:
            return hold(HoldReason.CLOSURE_INCOMPLETE, subject, f"{error.reason}: {error.message}")
        return hold(HoldReason.MIGRATION_REFUSED, subject, f"{error.reason}: {error.message}")

    def _after_consume(self) -> None:
        """After the consume only the grants of the response's calls (one each, matching) and the
        final run_held may follow; between request and consume nothing may."""
        request, consume = self.closure.request, self.closure.consume
        if request is None:
            return
        expected = {c.call_id: c.tool_name for c in self.calls} if self.calls is not None else None
        granted: set[str] = set()
        for entry in self.entries:
            if entry.sequence <= request.sequence or entry is self.final_held:
                continue
            if consume is not None and entry.sequence == consume.sequence:
                continue
            after = consume is not None and entry.sequence > consume.sequence
            if after and entry.kind == TOOL_CALL_GRANTED:
                call_id = entry.text("call_id")
                if expected is None or (
                    expected.get(call_id) == entry.text("tool_name") and call_id not in granted
                ):
                    granted.add(call_id)
                    continue
            self.holds.append(
                hold(
                    HoldReason.UNACCOUNTED_EFFECTS,
                    str(entry.sequence),
                    f"{entry.kind} at sequence {entry.sequence} is not accounted for by the "
                    "consumed response",
                )
            )
        if consume is not None and expected is not None:
            for call_id in expected:
                if call_id not in granted:
                    self.holds.append(
                        hold(
                            HoldReason.CLOSURE_INCOMPLETE,
                            call_id,
                            f"tool call {call_id!r} of the consumed response has no grant",
                        )
                    )

    def _unknown_outcomes(self) -> None:
        for entry in self.entries:
            if entry.kind == TOOL_OUTCOME and entry.text("status") == "unknown":
                self.holds.append(
                    hold(
                        HoldReason.UNRESOLVED_CUSTODY,
                        entry.text("call_id") or str(entry.sequence),
                        f"tool call {entry.text('call_id')!r} has a durable unknown outcome at "
                        f"sequence {entry.sequence}; it needs its original native reconciliation",
                    )
                )

    def _error_message_only(self) -> None:
        held = self.final_held
        if held is None:
            return
        call_id = held.text("call_id")
        evidence = (
            [c.call_id for c in self.calls if c.tool_name == EVIDENCE_TOOL] if self.calls else []
        )
        if (
            self.closure.consume is None
            or not call_id
            or (self.calls is not None and call_id not in evidence)
        ):
            self.holds.append(
                hold(
                    HoldReason.ERROR_MESSAGE_ONLY,
                    str(held.sequence),
                    "run_held names no consumed read_run_evidence call; a logged error message "
                    "alone supplies no authority",
                )
            )

    def _current_checks(self) -> None:
        policy, run = self.policy, self.run
        if not policy.enabled:
            self.holds.append(
                hold(
                    HoldReason.POLICY_DISABLED,
                    "enabled",
                    f"continuity policy revision {policy.revision} is disabled",
                )
            )
        if self.version == 2 and not policy.allow_unavailable_source_observations:
            self.holds.append(
                hold(
                    HoldReason.POLICY_DISABLED,
                    "allow_unavailable_source_observations",
                    f"policy revision {policy.revision} does not allow unavailable source "
                    "observations (version 2)",
                )
            )
        if not self.qualified:
            self.holds.append(
                hold(
                    HoldReason.PROFILE_NOT_QUALIFIED,
                    run.source_profile,
                    f"source profile {run.source_profile!r} is not a current qualified profile",
                )
            )
        if run.time_budget_protocol != SUPPORTED_TIME_BUDGET_PROTOCOL:
            self.holds.append(
                hold(
                    HoldReason.TIME_BUDGET_UNSUPPORTED,
                    run.time_budget_protocol,
                    f"time-budget protocol {run.time_budget_protocol!r} is not "
                    f"{SUPPORTED_TIME_BUDGET_PROTOCOL!r}",
                )
            )
        for execution in self.executions:
            if execution.state in OUTSTANDING_STATES:
                self.holds.append(
                    hold(
                        HoldReason.CLAIM_OUTSTANDING,
                        execution.execution_request_id,
                        f"execution request {execution.execution_request_id} (admission "
                        f"{execution.request_id!r}) is {execution.state.value}",
                    )
                )

    def _reconstruct(self) -> None:
        if self.checkpoint is None or self.response is None or not self.closure.consumed_at:
            return  # already held: a blob or the consumption time is missing
        try:
            self.reconstruction = self.sources.reconstruct(
                self.checkpoint, self.response, self.version, self.closure.consumed_at
            )
        except (FailedPrecondition, InvalidArgument) as error:
            self.holds.append(self._refusal(error))

    # --- the result ---------------------------------------------------------------------------

    def _proof(self) -> Proof:
        closure, analysis, rebuilt = self.closure, self.analysis, self.reconstruction
        return Proof(
            checkpoint_digest=closure.checkpoint_digest,
            consumed_response_digest=closure.response_digest,
            call_id=analysis.evidence_call_id if analysis else "",
            query_json=analysis.evidence_query_json if analysis else "",
            accepted_by_advertised_schema=bool(analysis and analysis.accepted_by_advertised_schema),
            rejected_by_pinned_validator=bool(analysis and analysis.rejected_by_pinned_validator),
            validator_error=analysis.validator_error if analysis else "",
            runtime_identity=_runtime_identity(analysis),
            validator_identity=analysis.validator_identity if analysis else "",
            derived_checkpoint_digest=rebuilt.derived_checkpoint_digest if rebuilt else "",
            witness_digest=rebuilt.witness_digest if rebuilt else "",
            consume_sequence=closure.consume.sequence if closure.consume else 0,
        )

    def _assemble(self) -> Candidate:
        run, policy, head = self.run, self.policy, self.snapshot.head
        holds = tuple(_unique(self.holds))
        if not holds and self.reconstruction is None:
            raise Internal("CANDIDATE_PROOF_MISSING", "no hold applies but no proof was built")
        version = self.version if self.reconstruction is not None else 0
        eligible = not holds
        proof = self._proof()
        qualification = Qualification(run.source_profile, self.qualified)
        source = source_digest(run)
        custody = digest_of(custody_rows(self.entries))
        candidate_digest = digest_of(
            {
                "kind": CANDIDATE_KIND,
                "run_id": run.run_id,
                "attempt_id": run.attempt_id,
                "version": version,
                "eligible": eligible,
                "run_digest": run.run_digest,
                "journal_digest": head.hash,
                "policy_digest": policy.digest,
                "policy_revision": policy.revision,
                "source_digest": source,
                "custody_digest": custody,
                "proof": proof.canonical(),
                "qualification": {
                    "source_profile": qualification.source_profile,
                    "qualified": qualification.qualified,
                },
                "holds": sorted([h.reason.value, h.subject] for h in holds),
            }
        )
        rejected_call = (
            self.analysis.evidence_call_id
            if self.analysis is not None and self.analysis.rejected_by_pinned_validator
            else ""
        )
        return Candidate(
            run_id=run.run_id,
            attempt_id=run.attempt_id,
            eligible=eligible,
            version=version,
            digests=Digests(candidate_digest, run.run_digest, head.hash, policy.digest),
            proof=proof,
            qualification=qualification,
            policy_revision=policy.revision,
            source_digest=source,
            custody_digest=custody,
            holds=holds,
            handoff=build_handoff(
                run=run,
                entries=self.entries,
                closure=self.closure,
                holds=holds,
                eligible=eligible,
                rejected_evidence_call=rejected_call,
                now=self.now,
            ),
            journal_head=head,
        )


def source_digest(run: RunRecord) -> str:
    """digest_of({source_revision, configuration_digest, source_profile}) of the run record."""
    return digest_of(
        {
            "source_revision": run.source_revision,
            "configuration_digest": run.configuration_digest,
            "source_profile": run.source_profile,
        }
    )


def _runtime_identity(analysis: ResponseAnalysis | None) -> str:
    """The registered runtime identity, bound by the digest of its canonical record."""
    if analysis is None or not analysis.runtime_identity_json:
        return ""
    try:
        return digest_of(parse_json(analysis.runtime_identity_json))
    except CanonicalJsonError:
        return ""


def _unique(holds: Iterable[Hold]) -> list[Hold]:
    seen: set[tuple[HoldReason, str]] = set()
    kept: list[Hold] = []
    for found in holds:
        key = (found.reason, found.subject)
        if key not in seen:
            seen.add(key)
            kept.append(found)
    return kept


def _raw_tool_calls(raw: bytes) -> tuple[ConsumedCall, ...] | None:
    """The calls of an OpenAI chat-completions response, read directly (used only when the
    analysis is unavailable, so grants can still be matched); None when unreadable."""
    try:
        document: Any = json.loads(raw)
        calls = document["choices"][0]["message"].get("tool_calls") or []
        return tuple(ConsumedCall(str(c["id"]), str(c["function"]["name"]), "") for c in calls)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None
