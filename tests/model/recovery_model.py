"""The three recoveries and reconciliation in the spec model: what the services must answer,
from the spec's state alone (docs/workflows/never-claimed.md, docs/workflows/reconciliation.md,
the provider-refusal and read-only observation workflows; spec 000's one-use recoveries, 001's
one admissibility check, 002's reconciliation).

Nothing here reads the services. The state beside :class:`SpecModel`'s runs is each run's
failure before a claim, its native turns (a first provider request refused before admission, a
later consumed turn with an unknown evidence read), its one stored recovery per workflow and the
requests a reconciliation decided.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.model.spec_model import (
    CLAIMED,
    COMMAND_LIMIT,
    EXPIRED,
    FAILED,
    LEASE_SECONDS,
    OK,
    QUEUED,
    UNRESOLVED,
    Answer,
    RunModel,
    SpecModel,
    refused,
)

#: A recovery's or reconciliation's identity expires this long after its action was stored
#: (ADR 0038): an identical repeat after that is refused, not replayed.
ACTION_IDENTITY_SECONDS = 7200
#: The two recoveries that rest on native turns, and the policy switch each needs.
REFUSAL, OBSERVATION = "rejected_boundary", "readonly_observation"
SWITCH = {
    REFUSAL: "allow_pre_admission_recovery",
    OBSERVATION: "allow_readonly_observation_recovery",
}
#: The ticket's original operator (also a factory administrator), and another administrator.
ORIGINAL_OPERATOR, OTHER_ADMINISTRATOR = "admin-operator-token", "admin-token"


@dataclass(frozen=True)
class StoredRecovery:
    """The request's one never-claimed recovery, as the ledger keeps it."""

    recovery_id: str
    actor: str
    #: What makes a repeat identical: the candidate digest it was submitted with.
    candidate_digest: str
    stored_at: float


@dataclass
class Recovering:
    """One run's recovery and reconciliation state."""

    #: The current request failed before any worker claimed it (FailUnclaimedExecutionRequest).
    failed_unclaimed: bool = False
    recovery: StoredRecovery | None = None
    #: Requests a retry reconciled: id -> (the fenced owner's token, its generation).
    reconciled: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: The current request was marked unresolved (its decision is spent).
    decided: bool = False
    #: The first claim's provider request was refused before admission, retained, and the
    #: request failed (the provider-refusal recovery's evidence).
    refused_turn: bool = False
    #: After the refusal recovery, the second claim's turn was consumed with an unknown evidence
    #: read and a retained listing, and the request failed (the observation recovery's).
    consumed_turn: bool = False
    #: The one provider-refusal and the one read-only observation recovery, by workflow.
    native: dict[str, StoredRecovery] = field(default_factory=dict)


@dataclass
class RecoveryModel:
    model: SpecModel
    runs: dict[str, Recovering] = field(default_factory=dict)

    def of(self, run: RunModel) -> Recovering:
        return self.runs.setdefault(run.run_id, Recovering())

    # -- failure before a claim --------------------------------------------------------------

    def predict_fail_unclaimed(self, run: RunModel) -> Answer:
        """Only a request stored queued at generation 0 fails here; a lease that ran out is no
        failure and no obstacle (nothing sweeps first)."""
        if run.state != QUEUED or run.generation != 0:
            return refused("FAILED_PRECONDITION", "EXECUTION_REQUEST_NOT_QUEUED")
        return OK

    def failed_unclaimed(self, run: RunModel) -> None:
        run.state = FAILED
        self.of(run).failed_unclaimed = True

    # -- the never-claimed recovery ----------------------------------------------------------

    def ended_unclaimed(self, run: RunModel) -> bool:
        """The request's history proves no worker claimed it before it ended: it failed before a
        claim, or a sweep expired it queued (ADR 0014: the recovery accepts ``expired`` like
        ``failed``; a lease that ran out with no sweep yet ended nothing), and no claim is in its
        request id's history: a reconciliation's retry is queued only for a claimed request."""
        if self.of(run).reconciled or run.claims:
            return False  # the request id's history holds a worker's claim
        return (run.state == FAILED and self.of(run).failed_unclaimed) or run.state == EXPIRED

    def recovery_held(self, run: RunModel) -> bool:
        """The recovery candidate's holds, as far as they follow from the model: the policy off,
        a request that did not end unclaimed, the one recovery spent (the actor's authority is
        judged by the commit, not the held candidate)."""
        return (
            not self.model.policy.enabled
            or not self.ended_unclaimed(run)
            or self.of(run).recovery is not None
        )

    def predict_recovery(
        self, run: RunModel, actor: str, recovery_id: str, digest: str, fresh: bool, acks: bool
    ) -> Answer:
        """A submission (``fresh``: its digest is the candidate's just read)."""
        if not acks:
            return refused("INVALID_ARGUMENT", "ACKNOWLEDGEMENT_REQUIRED")
        stored = self.of(run).recovery
        if stored is not None:
            # the candidate is held (the action is spent) or stale: admission reads back, and
            # the one idempotency rule answers
            return self._replay_or_conflict(stored, actor, recovery_id, digest)
        return self._predict_commit(run, actor, fresh)

    def _predict_commit(self, run: RunModel, actor: str, fresh: bool) -> Answer:
        """A first recovery of the request: admission's recomputation, then the commit."""
        if not fresh:
            return refused("FAILED_PRECONDITION", "CANDIDATE_DIGEST_STALE")
        if self.recovery_held(run):
            return refused("FAILED_PRECONDITION", "CANDIDATE_HELD")
        if actor != ORIGINAL_OPERATOR:
            return refused("FAILED_PRECONDITION", "RECOVERY_UNRESOLVED")
        # the commit sweeps due leases before its cap check (the rule expires them after this
        # prediction); the requeued request counts again
        if self.model.pending_after_sweep() >= self.model.policy.pending_cap:
            return refused("RESOURCE_EXHAUSTED", "PENDING_TICKET_LIMIT")
        return OK

    @staticmethod
    def reaches_the_commit(answer: Answer) -> bool:
        """Whether a recovery submission reached the ledger's commit, whose first step expires
        what is due: a refusal rolls that back, and the ledger expires it again on its own, so
        the sweep stands whatever the commit answers (execution_stops.Expiry)."""
        return answer.ok or answer.reason in ("RECOVERY_UNRESOLVED", "PENDING_TICKET_LIMIT")

    def _replay_or_conflict(
        self, stored: StoredRecovery, actor: str, recovery_id: str, digest: str
    ) -> Answer:
        if recovery_id != stored.recovery_id:
            return refused("ALREADY_EXISTS", "RECOVERY_ALREADY_SPENT")
        if actor != stored.actor:
            return refused("ALREADY_EXISTS", "RECOVERY_ID_OWNED_BY_ANOTHER_IDENTITY")
        if digest != stored.candidate_digest:
            return refused("ALREADY_EXISTS", "RECOVERY_ID_CONFLICT")
        if self.model.now >= stored.stored_at + ACTION_IDENTITY_SECONDS:
            return refused("FAILED_PRECONDITION", "ACTION_IDENTITY_EXPIRED")
        return OK

    def recovered(self, run: RunModel, recovery: StoredRecovery) -> None:
        """The same request queued again at generation 0 under the current policy revision, with
        a new lease bounded as at admission; nothing refunded."""
        run.state, run.generation, run.revoked = QUEUED, 0, False
        run.lease_expires = self.model.now + LEASE_SECONDS
        state = self.of(run)
        state.recovery, state.failed_unclaimed = recovery, False

    # -- the provider-refusal and read-only observation recoveries ----------------------------

    def turnable(self, run: RunModel) -> bool:
        """A native worker turn can start: the request claimable now, and either never claimed
        (its first request will be refused) or claimed once and recovered from that refusal
        (the same request, answered and consumed)."""
        state = self.of(run)
        claimable = run.state == QUEUED and run.lease_expires > self.model.now and not run.revoked
        first = run.claims == 0 and not state.reconciled
        second = run.claims == 1 and REFUSAL in state.native and not state.consumed_turn
        return claimable and (first or second)

    def native_evidence(self, run: RunModel, workflow: str) -> bool:
        """The request's history is the workflow's supported one, its last failure included:
        for the refusal, one claim whose first request was refused; for the observation, the
        refusal recovered, then exactly one more claim whose turn was consumed."""
        state = self.of(run)
        if run.state != FAILED or state.reconciled:
            return False
        if workflow == REFUSAL:
            # the supported case only: nothing between the ticket and the claim, so a request
            # recovered from a failure before any claim stays held (its failure, witness and
            # requeue are not part of a refusal before admission)
            return state.refused_turn and run.claims == 1 and state.recovery is None
        return state.consumed_turn and run.claims == 2 and REFUSAL in state.native

    def native_held(self, run: RunModel, workflow: str) -> bool:
        """The workflow's candidate holds (for the ticket's original operator): the policy or
        the workflow's switch off, no supported history, or its one action spent."""
        return (
            not self.model.policy.switched_on(SWITCH[workflow])
            or not self.native_evidence(run, workflow)
            or workflow in self.of(run).native
        )

    def predict_native(
        self,
        run: RunModel,
        workflow: str,
        actor: str,
        recovery_id: str,
        digest: str,
        fresh: bool,
        acks: bool,
    ) -> Answer:
        """A submission of ``workflow``'s recovery: the order of the never-claimed one (the
        three share one admissibility check and one commit)."""
        if not acks:
            return refused("INVALID_ARGUMENT", "ACKNOWLEDGEMENT_REQUIRED")
        stored = self.of(run).native.get(workflow)
        if stored is not None:
            return self._replay_or_conflict(stored, actor, recovery_id, digest)
        return self._native_commit(run, workflow, actor, fresh)

    def _native_commit(self, run: RunModel, workflow: str, actor: str, fresh: bool) -> Answer:
        """A first recovery of ``workflow``: admission's recomputation, then the commit."""
        if not fresh:
            return refused("FAILED_PRECONDITION", "CANDIDATE_DIGEST_STALE")
        if self.native_held(run, workflow):
            return refused("FAILED_PRECONDITION", "CANDIDATE_HELD")
        if actor != ORIGINAL_OPERATOR:
            return refused("FAILED_PRECONDITION", "RECOVERY_UNRESOLVED")
        if self.model.pending_after_sweep() >= self.model.policy.pending_cap:
            return refused("RESOURCE_EXHAUSTED", "PENDING_TICKET_LIMIT")
        return OK

    def recovered_native(self, run: RunModel, workflow: str, recovery: StoredRecovery) -> None:
        """The same request queued again at the generation it failed under, under the current
        policy revision (which must keep the workflow's switch on from now), a new lease."""
        run.state, run.revoked = QUEUED, False
        run.lease_expires = self.model.now + LEASE_SECONDS
        run.switches.add(SWITCH[workflow])
        self.of(run).native[workflow] = recovery

    # -- reconciliation ----------------------------------------------------------------------

    def predict_verify(self, run: RunModel, proves: bool) -> Answer:
        """Only a claimed request's owner can be proven to have stopped; a verifier that proves
        nothing records nothing."""
        if run.state != CLAIMED:
            return refused("FAILED_PRECONDITION", "RECONCILIATION_UNRESOLVED")
        if not proves:
            return refused("FAILED_PRECONDITION", "RECONCILIATION_NOT_VERIFIED")
        return OK

    def predict_reconcile(
        self, run: RunModel, retry: bool, verified: bool, acknowledged: bool
    ) -> tuple[Answer, bool]:
        """A decision on the snapshot just inspected, and whether the commit's sweep expired
        something (which stands whatever the commit answers). The commit's first step expires
        what is due; a request the reviewer saw queued may so have changed."""
        if retry and acknowledged:
            return refused("INVALID_ARGUMENT", "RECONCILIATION_INVALID"), False
        expired = self.model.expire_due()
        return self.decide(run, retry, verified, acknowledged, expired), bool(expired)

    def decide(
        self,
        run: RunModel,
        retry: bool,
        verified: bool,
        acknowledged: bool,
        expired: list[RunModel],
    ) -> Answer:
        if run in expired:
            return refused("FAILED_PRECONDITION", "RECONCILIATION_STATE_CHANGED")
        unresolved = refused("FAILED_PRECONDITION", "RECONCILIATION_UNRESOLVED")
        if run.state != CLAIMED:
            return unresolved  # REQUEST_NOT_CLAIMED, or RECOVERY_SPENT once decided
        if not retry:
            return OK if verified or acknowledged else unresolved
        if (
            # UNRESOLVED_CUSTODY: the consumed turn's evidence read has an unknown, durable
            # outcome; a retry is a new action, and unknown native effects keep their original
            # reconciliation rules (spec 000), so only a mark is left
            self.of(run).consumed_turn
            or not verified
            or not self.model.policy.enabled
            or run.commands_used >= COMMAND_LIMIT  # BUDGET_EXHAUSTED: nothing is refunded
        ):
            return unresolved
        # the retry replaces the claimed request among the pending ones
        if self.model.pending() - 1 >= self.model.policy.pending_cap:
            return refused("RESOURCE_EXHAUSTED", "PENDING_TICKET_LIMIT")
        return OK

    def marked_unresolved(self, run: RunModel) -> None:
        run.state = UNRESOLVED
        self.of(run).decided = True

    def retried(self, run: RunModel, retry_request_id: str) -> None:
        """The claimed request is reconciled (its owner fenced for ever); a new request of the
        same admission is queued at generation 0 with a lease as long as the interrupted one."""
        self.of(run).reconciled[run.execution_request_id] = (run.owner, run.generation)
        run.execution_request_id = retry_request_id
        run.state, run.generation, run.revoked, run.owner = QUEUED, 0, False, ""
        run.refusal_recorded = False
        run.lease_expires = self.model.now + LEASE_SECONDS
