"""The spec as a model: what the services must answer to each operation, from the spec's state
alone (docs/reliability.md, "The model").

Nothing here reads the services. Each ``predict_*`` method names the answer the spec requires —
success, or the gRPC code and reason of the refusal — and :meth:`SpecModel.apply` moves the model
as a success does. Time is the model's too: seconds since the model began, moved only by
:meth:`advance`; the services' clock is moved by the same amounts (tests/model/harness.py).

Spec references: 000 §4 (one ticket per consumed graph, the pending cap), 001 (admission, the
ownership lease), 002 (claims, leases, completion, failure, cancellation, expiry, the command
ledger).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The ownership lease a queued request gets, and a claim's: the smallest of the requested
#: validity (1800), the policy window (3600) and the seeded run's frozen provider timeout (900).
LEASE_SECONDS = 900
#: The seeded runs' command ledger: commands already run, and the limit (services/demo/seed.py).
COMMANDS_BEFORE = 11
COMMAND_LIMIT = 22

QUEUED, CLAIMED = "queued", "claimed"
COMPLETED, FAILED, CANCELLED, EXPIRED = "completed", "failed", "cancelled", "expired"
#: A reconciliation's decisions: the claimed request retried (reconciled) or marked unresolved.
RECONCILED, UNRESOLVED = "reconciled", "unresolved"
PENDING = (QUEUED, CLAIMED)


@dataclass(frozen=True)
class Answer:
    """What the spec requires: ``ok``, or the refusal's code and reason."""

    code: str = "OK"
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.code == "OK"


OK = Answer()


def refused(code: str, reason: str) -> Answer:
    return Answer(code, reason)


@dataclass
class RunModel:
    """One held run and, once admitted, its one execution request."""

    run_id: str
    held_at: float
    #: The admitted request, once a ticket exists (one per consumed graph, ever).
    state: str | None = None
    request_id: str = ""
    execution_request_id: str = ""
    #: The request the ticket names (a reconciliation's retry is another, under the same ticket).
    ticket_request_id: str = ""
    #: When the ownership lease admission granted runs out (a claim keeps it; nothing renews it).
    lease_expires: float = 0.0
    generation: int = 0
    commands_used: int = COMMANDS_BEFORE
    command_ids: set[str] = field(default_factory=set)
    #: A policy revision written after the ticket turned the policy off: the request stops for
    #: ever, whatever later revisions say (ADR 0014).
    revoked: bool = False
    #: A claim refused by the revocation left the request's one admission-refusal record.
    refusal_recorded: bool = False
    #: The token of the worker holding the claim ("" while nobody does).
    owner: str = ""
    #: Claims granted on the request (a provider-refusal or observation history counts them).
    claims: int = 0
    #: Policy switches the request's recoveries made it need (a revision turning one off
    #: revokes it, as turning the policy off does).
    switches: set[str] = field(default_factory=set)


@dataclass
class Policy:
    enabled: bool
    pending_cap: int
    window_seconds: int = 3600
    #: The provider-refusal and the read-only observation recoveries' own switches.
    allow_pre_admission_recovery: bool = True
    allow_readonly_observation_recovery: bool = True

    def switched_on(self, switch: str) -> bool:
        return self.enabled and bool(getattr(self, switch))


@dataclass
class SpecModel:
    policy: Policy
    now: float = 0.0
    runs: dict[str, RunModel] = field(default_factory=dict)

    # -- time and policy ---------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def policy_written(
        self, enabled: bool, pending_cap: int, switches: tuple[bool, bool] = (True, True)
    ) -> None:
        self.policy.enabled, self.policy.pending_cap = enabled, pending_cap
        (
            self.policy.allow_pre_admission_recovery,
            self.policy.allow_readonly_observation_recovery,
        ) = switches
        for run in self.runs.values():
            off = [name for name in run.switches if not getattr(self.policy, name)]
            if run.state is not None and (not enabled or off):
                run.revoked = True

    def pending(self) -> int:
        return sum(1 for run in self.runs.values() if run.state in PENDING)

    def pending_after_sweep(self) -> int:
        """The pending count a commit that sweeps first checks its cap against: the requests due
        are expired before the check."""
        return self.pending() - len(self.due())

    def _lease_live(self, run: RunModel) -> bool:
        return self.now < run.lease_expires

    # -- admission (spec 001) ----------------------------------------------------------------

    def reaches_the_ledger(self, run: RunModel) -> bool:
        """Whether an admission of ``run`` passes the candidate and reaches the ledger's
        transaction, whose first step expires what is due (even when it then refuses)."""
        return run.state is None and self.policy.enabled

    def predict_admit(self, run: RunModel) -> Answer:
        """A new submission for ``run`` (a fresh request id, the candidate just read). Call
        :meth:`expire_due` first when it :meth:`reaches_the_ledger`."""
        if not self.reaches_the_ledger(run):
            # One ticket per consumed graph; a disabled policy. (The window bounds the lease; it
            # is no limit on how old a hold may be.)
            return refused("FAILED_PRECONDITION", "CANDIDATE_HELD")
        if self.pending() >= self.policy.pending_cap:
            return refused("RESOURCE_EXHAUSTED", "PENDING_TICKET_LIMIT")
        return OK

    def admitted(self, run: RunModel, request_id: str, execution_request_id: str) -> None:
        run.state = QUEUED
        run.request_id = request_id
        run.execution_request_id = run.ticket_request_id = execution_request_id
        run.lease_expires = self.now + LEASE_SECONDS

    # -- the worker (spec 002) ---------------------------------------------------------------

    def predict_claim(self, run: RunModel) -> Answer:
        if run.state == EXPIRED:
            return refused("FAILED_PRECONDITION", "LEASE_EXPIRED")
        if run.state != QUEUED:
            return refused("FAILED_PRECONDITION", "EXECUTION_REQUEST_NOT_QUEUED")
        if not self._lease_live(run):
            return refused("FAILED_PRECONDITION", "LEASE_EXPIRED")
        if run.revoked:
            return refused("FAILED_PRECONDITION", "POLICY_REVOKED")
        return OK

    def claim_refusal_writes(self, run: RunModel, answer: Answer) -> bool:
        """A claim refused by the revocation leaves one admission-refusal record, once."""
        if answer.reason != "POLICY_REVOKED" or run.refusal_recorded:
            return False
        run.refusal_recorded = True
        return True

    def claimed(self, run: RunModel) -> None:
        """The claim takes the request under the one finite lease admission granted: it renews
        nothing, so the lease still ends where it ended while queued."""
        run.state = CLAIMED
        run.generation += 1
        run.claims += 1

    def _predict_fenced(self, run: RunModel) -> Answer:
        """A write under the claim's lease: completion, failure, a command."""
        if run.state == CANCELLED:
            # A cancelled request fences every generation, by name.
            return refused("FAILED_PRECONDITION", "EXECUTION_REQUEST_CANCELLED")
        if run.state in (RECONCILED, UNRESOLVED):
            return refused("FAILED_PRECONDITION", "LEASE_FENCED_BY_RECONCILIATION")
        if run.state != CLAIMED:
            return refused("FAILED_PRECONDITION", "EXECUTION_REQUEST_NOT_CLAIMED")
        if not self._lease_live(run):
            return refused("FAILED_PRECONDITION", "LEASE_EXPIRED")
        if run.revoked:
            return refused("FAILED_PRECONDITION", "POLICY_REVOKED")
        return OK

    def predict_finish(self, run: RunModel, outcome: str) -> Answer:
        """Completion is refused once revoked; a failure is always reported (the worker stops)."""
        answer = self._predict_fenced(run)
        if outcome == FAILED and answer.reason == "POLICY_REVOKED":
            return OK
        return answer

    def finished(self, run: RunModel, state: str) -> None:
        run.state = state

    def predict_command(self, run: RunModel, command_id: str) -> Answer:
        answer = self._predict_fenced(run)
        if not answer.ok or command_id in run.command_ids:
            return answer
        if run.commands_used >= COMMAND_LIMIT:
            return refused("RESOURCE_EXHAUSTED", "COMMAND_LIMIT_REACHED")
        return OK

    def commanded(self, run: RunModel, command_id: str) -> bool:
        """Record a command; True when it was charged (a repeat charges nothing)."""
        if command_id in run.command_ids:
            return False
        run.command_ids.add(command_id)
        run.commands_used += 1
        return True

    # -- administration ----------------------------------------------------------------------

    def predict_cancel(self, run: RunModel) -> Answer:
        if run.state in PENDING or run.state == CANCELLED:
            return OK  # cancelling a cancelled request answers it again, writing nothing
        return refused("FAILED_PRECONDITION", "EXECUTION_REQUEST_NOT_CANCELLABLE")

    def observed(self, run: RunModel) -> str | None:
        """The state a read presents: a queued request whose lease ran out reads as expired
        before any sweep stores it so (the stored state still counts against the cap)."""
        if run.state == QUEUED and not self._lease_live(run):
            return EXPIRED
        return run.state

    def due(self) -> list[RunModel]:
        """The queued requests whose ownership lease ran out: a sweep expires exactly these."""
        return [
            run for run in self.runs.values() if run.state == QUEUED and not self._lease_live(run)
        ]

    def expire_due(self) -> list[RunModel]:
        """Run a sweep: the explicit one, or the first step of an admission at the ledger."""
        due = self.due()
        for run in due:
            run.state = EXPIRED
        return due
