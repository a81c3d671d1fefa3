"""Reconciliation of a claimed execution request whose owner was lost (ADR 0010): the inputs, the
read-only snapshot and its digest, and the recorded verifications (the stored decision is
``reconciliation_records.py``). Pure rules, without storage; ``transactions/reconciliation.py``
applies them in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from services.ledger.domain.execution import ExecutionRequestRecord, RequestState
from services.ledger.domain.intents import IntentTracker, OpenIntent
from services.ledger.domain.journal import EntryKind, StoredEntry
from services.ledger.domain.lease_records import LeaseFence, Standing, lease_generation
from services.ledger.domain.owner_instance import OwnerInstance
from shared.continuity.admissibility_facts import (
    MARK_UNRESOLVED,
    RETRY_STAGE,
    BoundRequest,
    Consumed,
)
from shared.continuity.canonical import digest_of, is_digest, parse_json
from shared.continuity.identifiers import check_identifier
from shared.continuity.timeutil import from_text
from shared.runtime.errors import FieldViolation, InvalidArgument

DECISIONS = (RETRY_STAGE, MARK_UNRESOLVED)
#: The verifier's effect classes that allow a retry.
PROVEN_EFFECTS = ("no_effect", "retry_safe")
#: Longest evidence reference accepted; a longer one fails closed.
MAX_EVIDENCE_REFERENCE = 1024
#: Longest a verification counts; a verifier asking for more gets this.
MAX_VERIFICATION_SECONDS = 3600
#: Ledger-written kinds of other workflows: after the claim they are an unrelated hold.
UNRELATED_WORKFLOW_KINDS = frozenset(
    {
        EntryKind.MIGRATION_SETTLEMENT.value,
        EntryKind.OWNERSHIP_CLAIM.value,
        EntryKind.RECOVERY_WITNESS.value,
        EntryKind.REFUSAL_SETTLEMENT.value,
        EntryKind.ADMISSION_REFUSAL.value,
    }
)


def _invalid(violations: list[FieldViolation]) -> InvalidArgument:
    return InvalidArgument(
        "RECONCILIATION_INVALID",
        "; ".join(f"{v.field}: {v.description}" for v in violations),
        field_violations=violations,
    )


def _check_common(
    run_id: str, execution_request_id: str, reconciliation_id: str
) -> list[FieldViolation]:
    for name, value in (
        ("run_id", run_id),
        ("execution_request_id", execution_request_id),
        ("reconciliation_id", reconciliation_id),
    ):
        check_identifier(name, value)
    return []


def _check_evidence(evidence_reference: str, violations: list[FieldViolation]) -> None:
    if not evidence_reference.strip():
        violations.append(FieldViolation("evidence_reference", "required"))
    elif len(evidence_reference) > MAX_EVIDENCE_REFERENCE:
        violations.append(
            FieldViolation("evidence_reference", f"at most {MAX_EVIDENCE_REFERENCE} characters")
        )


@dataclass(frozen=True)
class VerifyInput:
    """A request for the deployment verifier's proof of one inspected snapshot."""

    run_id: str
    execution_request_id: str
    reconciliation_id: str
    reconciliation_digest: str
    evidence_reference: str
    actor: str

    def validate(self) -> None:
        violations = _check_common(self.run_id, self.execution_request_id, self.reconciliation_id)
        if not is_digest(self.reconciliation_digest):
            violations.append(FieldViolation("reconciliation_digest", "must be sha256:<64 hex>"))
        _check_evidence(self.evidence_reference, violations)
        if violations:
            raise _invalid(violations)


@dataclass(frozen=True)
class ReconcileInput:
    """The reviewed decision, as the administrator submitted it."""

    run_id: str
    execution_request_id: str
    reconciliation_id: str
    expected_state: str
    expected_lease_generation: int
    evidence_reference: str
    decision: str
    reconciliation_digest: str
    actor: str
    #: MARK_UNRESOLVED only: release the claim although no recorded verification proves the
    #: prior owner's cessation (ADR 0045).
    cessation_unproven_acknowledged: bool = False

    def validate(self) -> None:
        violations = _check_common(self.run_id, self.execution_request_id, self.reconciliation_id)
        if self.decision not in DECISIONS:
            violations.append(FieldViolation("decision", "RETRY_STAGE or MARK_UNRESOLVED"))
        if self.cessation_unproven_acknowledged and self.decision == RETRY_STAGE:
            violations.append(
                FieldViolation(
                    "cessation_unproven_acknowledged",
                    "only with MARK_UNRESOLVED: a retry needs a recorded proof of cessation",
                )
            )
        if self.expected_state not in {state.value for state in RequestState}:
            violations.append(FieldViolation("expected_state", "a known execution request state"))
        if not 0 <= self.expected_lease_generation < 2**62:
            violations.append(FieldViolation("expected_lease_generation", "out of range"))
        if not is_digest(self.reconciliation_digest):
            violations.append(FieldViolation("reconciliation_digest", "must be sha256:<64 hex>"))
        _check_evidence(self.evidence_reference, violations)
        if violations:
            raise _invalid(violations)

    @property
    def content_digest(self) -> str:
        """Digest of everything the decision says (the idempotency content; not the actor)."""
        return digest_of(
            {
                "run_id": self.run_id,
                "execution_request_id": self.execution_request_id,
                "reconciliation_id": self.reconciliation_id,
                "expected_state": self.expected_state,
                "expected_lease_generation": self.expected_lease_generation,
                "evidence_reference": self.evidence_reference,
                "decision": self.decision,
                "reconciliation_digest": self.reconciliation_digest,
                # only when set: decisions saved before it existed keep their digest
                **(
                    {"cessation_unproven_acknowledged": True}
                    if self.cessation_unproven_acknowledged
                    else {}
                ),
            }
        )


def retry_request_id(run_id: str, request_id: str, reconciliation_id: str) -> str:
    """The retry's execution request identity: new, and the same for the same decision."""
    return (
        "exr_"
        + digest_of(
            {"run_id": run_id, "request_id": request_id, "reconciliation_id": reconciliation_id}
        )[7:31]
    )


@dataclass(frozen=True)
class EntryRef:
    sequence: int
    kind: str
    hash: str
    #: The lease generation the entry names; -1 when none.
    generation: int
    #: A worker record naming the request not written under its fenced lease (lease_records):
    #: shown, never counted.
    foreign: bool = False

    def custody(self) -> dict[str, Any]:
        # ``foreign`` only where it is set: a journal without foreign records keeps its digest
        record = asdict(self)
        if not self.foreign:
            record.pop("foreign")
        return record


@dataclass(frozen=True)
class Claim:
    sequence: int
    generation: int
    worker: str
    #: The claiming process its ``worker_claimed`` entry recorded; None when it recorded none.
    owner: OwnerInstance | None = None

    def custody(self) -> dict[str, Any]:
        # the owner is part of the claim entry, whose hash the deliveries already digest
        return {"sequence": self.sequence, "generation": self.generation, "worker": self.worker}


@dataclass(frozen=True)
class Verification:
    """One recorded RECONCILIATION_VERIFICATION entry."""

    reconciliation_id: str
    execution_request_id: str
    reconciliation_digest: str
    verifier: str
    cessation_verified: bool
    exposure_within_reservation: bool
    effect: str
    evidence_reference: str
    sequence: int
    verified_at: str
    expires_at: str
    requested_by: str
    detail: str

    def payload(self) -> dict[str, Any]:
        """The journal payload (the sequence, time and actor are the entry's own)."""
        record = asdict(self)
        for key in ("sequence", "verified_at", "requested_by"):
            record.pop(key)
        return record

    @classmethod
    def from_entry(cls, entry: StoredEntry) -> Verification:
        payload = _payload(entry)
        return cls(
            reconciliation_id=str(payload.get("reconciliation_id", "")),
            execution_request_id=str(payload.get("execution_request_id", "")),
            reconciliation_digest=str(payload.get("reconciliation_digest", "")),
            verifier=str(payload.get("verifier", "")),
            cessation_verified=payload.get("cessation_verified") is True,
            exposure_within_reservation=payload.get("exposure_within_reservation") is True,
            effect=str(payload.get("effect", "")),
            evidence_reference=str(payload.get("evidence_reference", "")),
            sequence=entry.sequence,
            verified_at=entry.recorded_at,
            expires_at=str(payload.get("expires_at", "")),
            requested_by=entry.actor,
            detail=str(payload.get("detail", "")),
        )


@dataclass(frozen=True)
class Snapshot:
    """What an administrator reviews: one request and everything charged to it."""

    run_id: str
    request_id: str
    attempt_id: str
    reconciliation_id: str
    record: ExecutionRequestRecord
    chain: tuple[ExecutionRequestRecord, ...]
    claims: tuple[Claim, ...]
    deliveries: tuple[EntryRef, ...]
    later_entries: tuple[EntryRef, ...]
    commands_used: int
    command_limit: int
    charged_under_request: tuple[str, ...]
    consumed: Consumed
    reserved_lease_seconds: int
    #: Tool calls whose durable outcome is unknown (run-wide).
    uncertain: tuple[str, ...]
    verifications: tuple[Verification, ...]
    digest: str
    #: Effect intents under the request without a closing outcome (derived from deliveries).
    open_intents: tuple[OpenIntent, ...] = ()

    @property
    def current_claim(self) -> Claim | None:
        """The claim of the request's current lease generation: its owner is the one lost."""
        mine = [c for c in self.claims if c.generation == self.record.lease_generation]
        return mine[-1] if mine else None

    @property
    def generations(self) -> tuple[int, ...]:
        return tuple(claim.generation for claim in self.claims)

    @property
    def unrelated(self) -> tuple[int, ...]:
        """Later entries another workflow wrote: an unrelated hold on the retry."""
        return tuple(e.sequence for e in self.later_entries if e.kind in UNRELATED_WORKFLOW_KINDS)

    def known_effects(self) -> tuple[tuple[str, int], ...]:
        effects = [
            (
                f"worker {c.worker} claimed {self.record.execution_request_id} at generation "
                f"{c.generation}",
                c.sequence,
            )
            for c in self.claims
        ]
        effects += [
            (
                # -1 is the absence of a generation, not one: "under generation -1" misled.
                (
                    f"{d.kind} under generation {d.generation}"
                    if d.generation >= 0
                    else f"{d.kind} (names no lease generation)"
                )
                + (" (foreign: not written under the lease, not counted)" if d.foreign else ""),
                d.sequence,
            )
            for d in self.deliveries
            if d.kind != EntryKind.WORKER_CLAIMED.value
        ]
        return tuple(sorted(effects, key=lambda effect: effect[1]))


def _payload(entry: StoredEntry) -> dict[str, Any]:
    try:
        payload = parse_json(entry.payload_json)
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def _counts(payload: Mapping[str, Any], standing: Standing, intents: IntentTracker) -> bool:
    """Whether a tool outcome sets its call's latest status: never a foreign one, and for a call
    the request's worker journaled an intent for, only the worker's own under the lease."""
    call_id = payload.get("call_id")
    if not isinstance(call_id, str) or standing is Standing.FOREIGN:
        return False
    return standing is Standing.FENCED or call_id not in intents.intents


def _record_custody(record: ExecutionRequestRecord) -> dict[str, Any]:
    return {
        "execution_request_id": record.execution_request_id,
        "state": record.state.value,
        "lease_generation": record.lease_generation,
        "lease_seconds": record.lease_seconds,
        "lease_expires_at": record.lease_expires_at,
        "owner": record.owner,
        "checkpoint_digest": record.checkpoint_digest,
        "policy_revision": record.policy_revision,
    }


def build_snapshot(
    record: ExecutionRequestRecord,
    chain: Iterable[ExecutionRequestRecord],
    entries: Iterable[StoredEntry],
    *,
    command_limit: int,
    deadline_remaining_seconds: int,
    reconciliation_id: str,
) -> Snapshot:
    """The snapshot of ``record`` from the run's journal (every entry, in sequence order). Of
    the worker records naming the request only those written under its fenced lease count
    (intents, outcomes); the others are deliveries marked foreign."""
    target = record.execution_request_id
    fence = LeaseFence(target)
    claims: list[Claim] = []
    deliveries: list[EntryRef] = []
    later: list[EntryRef] = []
    verifications: list[Verification] = []
    commands: set[str] = set()
    charged: list[str] = []
    outcomes: dict[str, str] = {}
    intents = IntentTracker()
    responses = tool_calls = 0
    for entry in sorted(entries, key=lambda e: e.sequence):
        payload = _payload(entry)
        standing = fence.see(entry, payload)
        if entry.kind == EntryKind.RESPONSE_CONSUMED.value:
            responses += 1
        elif entry.kind == EntryKind.TOOL_CALL_GRANTED.value:
            tool_calls += 1
        elif entry.kind == EntryKind.TOOL_OUTCOME.value and _counts(payload, standing, intents):
            outcomes[str(payload["call_id"])] = str(payload.get("status", ""))
        elif entry.kind == EntryKind.COMMAND_EXECUTED.value:
            command_id = str(payload.get("command_id", ""))
            commands.add(command_id)
            if payload.get("execution_request_id") == target:
                charged.append(command_id)
        if entry.kind == EntryKind.RECONCILIATION_VERIFICATION.value:
            # not custody: recorded proofs are listed, never digested (each binds a digest)
            if payload.get("execution_request_id") == target:
                verifications.append(Verification.from_entry(entry))
            continue
        ref = EntryRef(
            entry.sequence,
            entry.kind,
            entry.hash,
            lease_generation(payload),
            standing is Standing.FOREIGN,
        )
        if payload.get("execution_request_id") == target:
            if entry.kind == EntryKind.WORKER_CLAIMED.value:
                owner = OwnerInstance.from_payload(payload.get("owner_instance"))
                claims.append(Claim(entry.sequence, ref.generation, entry.actor, owner))
            if standing is Standing.FENCED:
                intents.add(entry, payload)
            deliveries.append(ref)
        elif claims:
            later.append(ref)
    chain = tuple(chain)
    consumed = Consumed(
        responses, tool_calls, len(commands), command_limit, deadline_remaining_seconds
    )
    reserved = sum(r.lease_seconds for r in chain)
    uncertain = tuple(sorted(call for call, status in outcomes.items() if status == "unknown"))
    custody = {
        "run_id": record.run_id,
        "request_id": record.request_id,
        "attempt_id": record.attempt_id,
        "execution_request": _record_custody(record),
        "chain": [_record_custody(r) for r in chain],
        "claims": [c.custody() for c in claims],
        "deliveries": [d.custody() for d in deliveries],
        "later_entries": [e.custody() for e in later],
        "commands": {"used": len(commands), "limit": command_limit, "charged": sorted(charged)},
        "tokens": {"model_responses": responses, "tool_calls": tool_calls},
        "reserved_lease_seconds": reserved,
        "uncertain": list(uncertain),
    }
    return Snapshot(
        run_id=record.run_id,
        request_id=record.request_id,
        attempt_id=record.attempt_id,
        reconciliation_id=reconciliation_id,
        record=record,
        chain=chain,
        claims=tuple(claims),
        deliveries=tuple(deliveries),
        later_entries=tuple(later),
        commands_used=len(commands),
        command_limit=command_limit,
        charged_under_request=tuple(charged),
        consumed=consumed,
        reserved_lease_seconds=reserved,
        uncertain=uncertain,
        verifications=tuple(verifications),
        digest=digest_of(custody),
        open_intents=intents.still_open(outcomes),
    )


def verification_problems(
    snapshot: Snapshot, now: datetime
) -> tuple[tuple[str, ...], Verification | None]:
    """Why no recorded verification lets this reconciliation retry (empty: the one that does)."""
    mine = [v for v in snapshot.verifications if v.reconciliation_id == snapshot.reconciliation_id]
    if not mine:
        return (
            "no verification is recorded for this reconciliation; a timeout or a missing result "
            "proves nothing",
        ), None
    current = [v for v in mine if v.reconciliation_digest == snapshot.digest]
    if not current:
        return ("the recorded verification examined another snapshot; verify again",), None
    live = [v for v in current if v.expires_at and now < from_text(v.expires_at)]
    if not live:
        return (f"the recorded verification expired at {current[-1].expires_at}",), None
    latest = live[-1]
    problems = []
    if not latest.cessation_verified:
        problems.append("cessation of the prior owner is not verified")
    if not latest.exposure_within_reservation:
        problems.append("exposure within the reservation is not verified")
    if latest.effect not in PROVEN_EFFECTS:
        problems.append("neither no effect nor retry-safe is verified")
    return tuple(problems), (None if problems else latest)


def budget_problems(snapshot: Snapshot) -> tuple[str, ...]:
    """Limits that leave a retry nothing to run under; reconciliation never adds allowance."""
    problems = []
    if snapshot.command_limit and snapshot.commands_used >= snapshot.command_limit:
        problems.append(
            f"the command budget is exhausted ({snapshot.commands_used} of "
            f"{snapshot.command_limit})"
        )
    if snapshot.consumed.deadline_remaining_seconds == 0:
        problems.append("the run's active deadline has passed")
    return tuple(problems)


def bound_request(snapshot: Snapshot, *, cessation_verified: bool) -> BoundRequest:
    return BoundRequest(
        request_id=snapshot.request_id,
        execution_request_id=snapshot.record.execution_request_id,
        state=snapshot.record.state.value,
        claimed=bool(snapshot.claims),
        failed_unclaimed=False,
        cessation_verified=cessation_verified,
    )
