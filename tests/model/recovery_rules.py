"""The model's rules for the never-claimed recovery and reconciliation, mixed into the machine
(tests/model/machine.py): each calls the public API as the administrator or the ticket's original
operator would, and compares the answer with tests/model/recovery_model.py's prediction.

The other two recoveries (the provider refusal, the read-only observation) rest on native
evidence the worker retains (a first provider request refused before admission, a later consumed
turn with an unknown evidence read): their rules, and the worker turns that produce that
evidence, are in tests/model/native_recovery_rules.py.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from forge.continuity.v1 import (
    admission_pb2,
    admission_pb2_grpc,
    candidate_pb2,
    candidate_pb2_grpc,
    execution_pb2,
    execution_pb2_grpc,
    reconciliation_pb2,
    reconciliation_pb2_grpc,
)
from tests.model.checking import Called, Divergence
from tests.model.parts import MachineParts
from tests.model.recovery_model import (
    ORIGINAL_OPERATOR,
    OTHER_ADMINISTRATOR,
    RecoveryModel,
    StoredRecovery,
)
from tests.model.spec_model import CLAIMED, QUEUED, RunModel, refused

ACKNOWLEDGEMENTS = (
    "acknowledge_never_claimed",
    "acknowledge_same_request_and_attempt",
    "acknowledge_budgets_charged",
    "acknowledge_same_attempt_lease",
)
#: What the model's verifier (tests/model/harness.py) is shown: "stopped" proves cessation, no
#: effect and bounded exposure for an hour; "running" proves nothing.
EVIDENCE = ("stopped", "running")
#: How a recovery submission is made (see :meth:`RecoveryRules.recover`).
VARIANTS = ("as reviewed", "unacknowledged", "as reviewed", "stale", "as reviewed")
#: A reconciliation's variants: (retry, the evidence shown to the verifier ("" none), the
#: unproven-cessation acknowledgement).
DECISIONS = (
    (True, "stopped", False),
    (False, "", False),
    (True, "", False),
    (False, "", True),
    (True, "stopped", True),
    (False, "stopped", False),
    (True, "running", False),
)
RETRY = reconciliation_pb2.RECONCILIATION_DECISION_RETRY_STAGE
MARK = reconciliation_pb2.RECONCILIATION_DECISION_MARK_UNRESOLVED


def _decided(response: reconciliation_pb2.ReconcileExecutionRequestResponse) -> dict[str, Any]:
    retry = response.reconciliation.retry_request.execution_request_id
    return {"created": response.created, "retry_execution_request_id": retry}


def _requeued(response: admission_pb2.RequestInvalidReadRecoveryResponse) -> dict[str, Any]:
    return {"created": response.created}


class RecoveryRules(MachineParts):
    """Failure before a claim, the never-claimed recovery, and reconciliation."""

    _recovering: RecoveryModel | None = None
    #: Each recovered run's submission, replayed as a retrying administrator would.
    recovery_submissions: dict[str, tuple[str, admission_pb2.RequestInvalidReadRecoveryRequest]]

    @property
    def recoveries(self) -> RecoveryModel:
        if self._recovering is None or self._recovering.model is not self.model:
            self._recovering = RecoveryModel(self.model)
            self.recovery_submissions = {}
        return self._recovering

    def _draw_run(self, data: st.DataObject, preferred: list[str]) -> RunModel:
        """A run from ``preferred``, where the rule's success is reachable, else any admitted
        (whose refusals the model predicts as well)."""
        choices = preferred or sorted(self.submissions)
        return self.model.runs[data.draw(st.sampled_from(choices))]

    # -- failure before a claim, and the never-claimed recovery ------------------------------

    def _never_claimed(self) -> list[str]:
        return sorted(
            run_id
            for run_id in self.submissions
            if self.model.runs[run_id].state == QUEUED and self.model.runs[run_id].generation == 0
        )

    @precondition(
        lambda self: (
            bool(self.submissions)
            and ((bool(self._never_claimed()) and self.steps % 2 == 0) or self.steps % 5 == 4)
        )
    )
    @rule(data=st.data())
    def fail_unclaimed(self, data: st.DataObject) -> None:
        """The dispatcher reports a request no worker claimed as failed (ADR 0041)."""
        run = self._draw_run(data, self._never_claimed())
        stub = execution_pb2_grpc.ExecutionServiceStub(self._channel("ledger", "admin-token"))
        predicted = self.recoveries.predict_fail_unclaimed(run)
        got = self.call(
            "admin",
            "fail_unclaimed",
            {"run_id": run.run_id, "execution_request_id": run.execution_request_id},
            lambda: stub.FailUnclaimedExecutionRequest(
                execution_pb2.FailUnclaimedExecutionRequestRequest(
                    execution_request_id=run.execution_request_id, reason="dispatch_refused"
                )
            ),
        )
        self.expect("fail_unclaimed", predicted, got)
        if got.answer.ok:
            self.recoveries.failed_unclaimed(run)

    def _ended_unclaimed(self) -> list[str]:
        return sorted(
            run_id
            for run_id in self.submissions
            if self.recoveries.ended_unclaimed(self.model.runs[run_id])
        )

    @precondition(
        lambda self: (
            bool(self.submissions) and (bool(self._ended_unclaimed()) or self.steps % 3 == 0)
        )
    )
    @rule(data=st.data())
    def recover(self, data: st.DataObject) -> None:
        """An administrator reads the recovery candidate and submits a new recovery id: the
        original operator, or another administrator; as reviewed, with an acknowledgement
        missing, or with a digest that is not the candidate's. The variant turns with the step
        count (Hypothesis's derandomized budget drew the first element of a sampled variant
        never), so a sequence replays exactly."""
        actor = (ORIGINAL_OPERATOR, ORIGINAL_OPERATOR, OTHER_ADMINISTRATOR)[self.steps % 3]
        self.submit_recovery(data, actor, VARIANTS[self.steps % len(VARIANTS)])

    def submit_recovery(self, data: st.DataObject, actor: str, variant: str) -> None:
        """One recovery submission by ``actor``, made as ``variant`` says (:data:`VARIANTS`)."""
        run = self._draw_run(data, self._ended_unclaimed())
        candidates = candidate_pb2_grpc.CandidateServiceStub(self._channel("candidate", actor))
        candidate = candidates.GetInvalidReadRecoveryCandidate(
            candidate_pb2.GetInvalidReadRecoveryCandidateRequest(
                run_id=run.run_id, request_id=run.request_id
            )
        ).candidate
        # the candidate is the same admissibility check the commit runs: its verdict is the
        # model's (for the original operator; another administrator's candidate holds authority)
        held = self.recoveries.recovery_held(run)
        if actor == ORIGINAL_OPERATOR and candidate.eligible == held:
            raise Divergence(
                f"the recovery candidate is eligible={candidate.eligible}, held={held}"
            )
        digest = candidate.candidate_digest if variant != "stale" else "sha256:" + "0" * 64
        submission = admission_pb2.RequestInvalidReadRecoveryRequest(
            run_id=run.run_id,
            request_id=run.request_id,
            recovery_id=f"rec-{uuid.uuid4().hex[:10]}",
            candidate_digest=digest,
            valid_for_seconds=900,
            **dict.fromkeys(ACKNOWLEDGEMENTS, True),
        )
        if variant == "unacknowledged":
            setattr(submission, data.draw(st.sampled_from(ACKNOWLEDGEMENTS)), False)
        predicted = self.recoveries.predict_recovery(
            run,
            actor,
            submission.recovery_id,
            digest,
            variant != "stale",
            variant != "unacknowledged",
        )
        sweeps = self.recoveries.reaches_the_commit(predicted) and bool(self.model.due())
        got = self._submit_recovery(run, actor, submission, sweeps)
        self.expect("recover", predicted, got)
        if sweeps:
            self.model.expire_due()
        if got.answer.ok:
            self._recovered(run, actor, submission, got)

    def _submit_recovery(
        self,
        run: RunModel,
        actor: str,
        submission: admission_pb2.RequestInvalidReadRecoveryRequest,
        sweeps: bool = False,
    ) -> Any:
        stub = admission_pb2_grpc.AdmissionServiceStub(self._channel("admission", actor))
        return self.call(
            actor,
            "recover",
            {
                "run_id": run.run_id,
                "execution_request_id": run.execution_request_id,
                "recovery_id": submission.recovery_id,
            },
            lambda: stub.RequestInvalidReadRecovery(submission),
            _requeued,
            lambda _: sweeps,  # a refused commit's sweep stands (the model expires it too)
        )

    def _recovered(
        self,
        run: RunModel,
        actor: str,
        submission: admission_pb2.RequestInvalidReadRecoveryRequest,
        got: Called,
    ) -> None:
        response: admission_pb2.RequestInvalidReadRecoveryResponse = got.response
        requeued = response.outcome.execution_request
        # a retry after a lost answer replays what the first attempt stored: created=false
        if not response.created and not got.settled:
            raise Divergence(f"a new recovery id answered created=false: {response}")
        if requeued.execution_request_id != run.execution_request_id or requeued.lease.generation:
            raise Divergence(f"the recovery requeued {requeued}, not the same request at 0")
        self.recoveries.recovered(
            run,
            StoredRecovery(
                submission.recovery_id, actor, submission.candidate_digest, self.model.now
            ),
        )
        self.recovery_submissions[run.run_id] = (actor, submission)

    @precondition(lambda self: bool(getattr(self, "recovery_submissions", None)))
    @rule(data=st.data(), same_actor=st.sampled_from((True, True, False)))
    def replay_recovery(self, data: st.DataObject, same_actor: bool) -> None:
        """The stored recovery again (an administrator retrying after a lost answer): the saved
        outcome, nothing written; another identity is refused, and so is a repeat after the
        identity expired."""
        run_id = data.draw(st.sampled_from(sorted(self.recovery_submissions)))
        run = self.model.runs[run_id]
        actor, submission = self.recovery_submissions[run_id]
        if not same_actor:
            actor = OTHER_ADMINISTRATOR if actor == ORIGINAL_OPERATOR else ORIGINAL_OPERATOR
        predicted = self.recoveries.predict_recovery(
            run, actor, submission.recovery_id, submission.candidate_digest, True, True
        )
        got = self._submit_recovery(run, actor, submission)
        self.expect("replay_recovery", predicted, got)
        if got.answer.ok and got.response.created:
            raise Divergence(f"a replayed recovery was created again: {got.response}")

    # -- reconciliation ----------------------------------------------------------------------

    def _claimed_runs(self) -> list[str]:
        return sorted(r for r in self.submissions if self.model.runs[r].state == CLAIMED)

    @precondition(
        lambda self: (
            bool(self.submissions)
            and ((bool(self._claimed_runs()) and self.steps % 2 == 1) or self.steps % 6 == 5)
        )
    )
    @rule(data=st.data())
    def reconcile_in_turn(self, data: st.DataObject) -> None:
        """A decision of :data:`DECISIONS`, turning with this sequence's decisions, counted
        apart while a claimed run exists: the first decision on a claimed run is the verified
        retry. (Turning with the step count, as before, drew it only at a step count that is an
        odd multiple of 7 with a run claimed at that moment, which the exploratory runs on
        PostgreSQL never met.)"""
        claimed = bool(self._claimed_runs())
        turns = self.__dict__.setdefault("decision_turns", Counter())
        decision = DECISIONS[turns[claimed] % len(DECISIONS)]
        turns[claimed] += 1
        self.reconcile(data, *decision)

    def reconcile(
        self, data: st.DataObject, retry: bool, evidence: str, acknowledged: bool
    ) -> None:
        """An administrator inspects a request, may have cessation verified, and decides."""
        run = self._draw_run(data, self._claimed_runs())
        stub = reconciliation_pb2_grpc.ReconciliationServiceStub(
            self._channel("ledger", "admin-token")
        )
        reconciliation_id = f"rcn-{uuid.uuid4().hex[:10]}"
        snapshot = stub.InspectReconciliation(
            reconciliation_pb2.InspectReconciliationRequest(
                run_id=run.run_id,
                execution_request_id=run.execution_request_id,
                reconciliation_id=reconciliation_id,
            )
        ).snapshot
        verified = False
        if evidence:
            verified = self._verify(run, stub, snapshot, evidence)
        predicted, sweeps = self.recoveries.predict_reconcile(run, retry, verified, acknowledged)
        decision = reconciliation_pb2.ReconcileExecutionRequestRequest(
            run_id=run.run_id,
            execution_request_id=run.execution_request_id,
            reconciliation_id=reconciliation_id,
            expected_state=snapshot.execution_request.state,
            expected_lease_generation=snapshot.execution_request.lease.generation,
            evidence_reference="model: the worker's host was drained",
            decision=RETRY if retry else MARK,
            reconciliation_digest=snapshot.reconciliation_digest,
            cessation_unproven_acknowledged=acknowledged,
        )
        got = self.call(
            "admin",
            "reconcile",
            {
                "run_id": run.run_id,
                "execution_request_id": run.execution_request_id,
                "reconciliation_id": reconciliation_id,
                "decision": "retry_stage" if retry else "mark_unresolved",
            },
            lambda: stub.ReconcileExecutionRequest(decision),
            _decided,
            lambda _: sweeps,
        )
        self.expect("reconcile_retry" if retry else "reconcile_mark", predicted, got)
        if not got.answer.ok:
            return
        saved = got.response.reconciliation
        if retry:
            new = saved.retry_request
            if new.execution_request_id == run.execution_request_id or new.lease.generation:
                raise Divergence(f"the retry is {new}, not a new request at generation 0")
            self.recoveries.retried(run, new.execution_request_id)
        else:
            self.recoveries.marked_unresolved(run)

    def _verify(
        self,
        run: RunModel,
        stub: reconciliation_pb2_grpc.ReconciliationServiceStub,
        snapshot: reconciliation_pb2.ReconciliationSnapshot,
        evidence: str,
    ) -> bool:
        predicted = self.recoveries.predict_verify(run, evidence == "stopped")
        got = self.call(
            "admin",
            "verify",
            {
                "run_id": run.run_id,
                "execution_request_id": run.execution_request_id,
                "reconciliation_id": snapshot.reconciliation_id,
            },
            lambda: stub.VerifyReconciliation(
                reconciliation_pb2.VerifyReconciliationRequest(
                    run_id=run.run_id,
                    execution_request_id=run.execution_request_id,
                    reconciliation_id=snapshot.reconciliation_id,
                    reconciliation_digest=snapshot.reconciliation_digest,
                    evidence_reference=evidence,
                )
            ),
        )
        self.expect("verify", predicted, got)
        return got.answer.ok

    def _with_reconciled(self) -> list[str]:
        return sorted(r for r, state in self.recoveries.runs.items() if state.reconciled)

    @precondition(lambda self: bool(self._recovering and self._with_reconciled()))
    @rule(data=st.data(), complete=st.booleans())
    def late_write_after_retry(self, data: st.DataObject, complete: bool) -> None:
        """The lost owner comes back: every write to the reconciled request, under its
        generation, is fenced for ever."""
        run = self.model.runs[data.draw(st.sampled_from(self._with_reconciled()))]
        reconciled = self.recoveries.of(run).reconciled
        request_id = data.draw(st.sampled_from(sorted(reconciled)))
        owner, generation = reconciled[request_id]
        stub = self._worker_of(owner)
        value = {
            "run_id": run.run_id,
            "execution_request_id": request_id,
            "lease_generation": generation,
        }
        if complete:
            got = self.call(
                owner,
                "complete",
                value,
                lambda: stub.CompleteExecutionRequest(
                    execution_pb2.CompleteExecutionRequestRequest(
                        execution_request_id=request_id, lease_generation=generation
                    )
                ),
            )
        else:
            got = self.call(
                owner,
                "record_command",
                {**value, "command_id": f"{request_id}-late"},
                lambda: stub.RecordCommand(
                    execution_pb2.RecordCommandRequest(
                        execution_request_id=request_id,
                        lease_generation=generation,
                        command_id=f"{request_id}-late",
                        command_digest="sha256:" + "d" * 64,
                    )
                ),
            )
        fenced = refused("FAILED_PRECONDITION", "LEASE_FENCED_BY_RECONCILIATION")
        self.expect("late_write_after_retry", fenced, got)
