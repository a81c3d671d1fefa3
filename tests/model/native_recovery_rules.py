"""The model's rules for the two recoveries that rest on native evidence, mixed into the machine
(tests/model/machine.py): the worker's native turns (tests/model/native_turns.py), the
provider-refusal (rejected-boundary) recovery and the read-only observation recovery. Each
submission is predicted by tests/model/recovery_model.py and compared with the real answer; each
candidate read is checked eligible exactly when the model says its commit would accept it."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from forge.continuity.v1 import (
    admission_pb2,
    admission_pb2_grpc,
    candidate_pb2,
    candidate_pb2_grpc,
    common_pb2,
    execution_pb2,
    ledger_pb2,
    ledger_pb2_grpc,
)
from services.demo.provider import SentRequest
from services.demo.refusal_story import _pinned_evidence
from tests.model.checking import Divergence, claim_acknowledged
from tests.model.native_turns import Ledgers, consumed_with_unknown_read, refused_first_request
from tests.model.parts import MachineParts
from tests.model.recovery_model import (
    OBSERVATION,
    ORIGINAL_OPERATOR,
    OTHER_ADMINISTRATOR,
    REFUSAL,
    RecoveryModel,
    StoredRecovery,
)
from tests.model.spec_model import FAILED, RunModel

REFUSAL_ACKNOWLEDGEMENTS = (
    "acknowledge_reviewed_provider_epoch",
    "acknowledge_no_response_or_tool_replay",
    "acknowledge_same_request_and_budgets",
    "acknowledge_finite_ownership_lease",
)
OBSERVATION_ACKNOWLEDGEMENTS = (
    "acknowledge_unavailable_observation",
    "acknowledge_no_original_callback_replay",
    "acknowledge_same_request_attempt_and_budgets",
    "acknowledge_finite_ownership_lease",
)
ACKNOWLEDGEMENTS = {REFUSAL: REFUSAL_ACKNOWLEDGEMENTS, OBSERVATION: OBSERVATION_ACKNOWLEDGEMENTS}
#: Who submits and how, turning with each workflow's submissions in the sequence (so a
#: sequence replays exactly, and a run with the evidence meets its success within a few).
VARIANTS = (
    (ORIGINAL_OPERATOR, "unacknowledged"),
    (ORIGINAL_OPERATOR, "as reviewed"),
    (OTHER_ADMINISTRATOR, "as reviewed"),
    (ORIGINAL_OPERATOR, "stale"),
    (ORIGINAL_OPERATOR, "as reviewed"),
)
#: The refused request, the administrator's review of it and the corrective configuration.
Refused = tuple[
    SentRequest,
    common_pb2.ReviewedProviderRejectionV1,
    common_pb2.CorrectiveProviderConfigurationV1,
]
OPERATION = {REFUSAL: "recover_refusal", OBSERVATION: "recover_observation"}
Submission = (
    admission_pb2.RequestRejectedBoundaryRecoveryRequest
    | admission_pb2.RequestReadonlyObservationRecoveryRequest
)


def _created(response: Any) -> dict[str, Any]:
    return {"created": response.created}


class NativeRecoveryRules(MachineParts):
    """Native worker turns, and the recoveries that rest on them."""

    if TYPE_CHECKING:  # RecoveryRules' (mixed in beside this class)

        @property
        def recoveries(self) -> RecoveryModel: ...

    #: Per stack, the refused request (the same bytes for every seeded run: one fixture
    #: checkpoint, one provider) and the administrator's review of it, once one was refused.
    #: (Each entry keeps its stack, so no later stack can reuse the id and meet a review whose
    #: reports another database stores.)
    refusals: ClassVar[dict[int, tuple[object, Refused]]] = {}

    @property
    def _refused(self) -> Refused | None:
        found = self.refusals.get(id(self.stack))
        return found[1] if found is not None and found[0] is self.stack else None

    def _ledgers(self, token: str) -> Ledgers:
        def stub(as_token: str) -> ledger_pb2_grpc.LedgerServiceStub:
            return ledger_pb2_grpc.LedgerServiceStub(self._channel("ledger", as_token))

        return Ledgers(stub(token), stub("reader-token"), stub("writer-token"))

    def _native_submissions(self) -> dict[tuple[str, str], tuple[str, Submission]]:
        """Each recovered run's submission per workflow (this example's), replayed as a
        retrying administrator would."""
        submissions: dict[tuple[str, str], tuple[str, Submission]]
        submissions = self.__dict__.setdefault("native_submissions", {})
        return submissions

    # -- the worker's native turns -----------------------------------------------------------

    def _turnable(self) -> list[str]:
        return sorted(r for r in self.submissions if self.recoveries.turnable(self.model.runs[r]))

    @precondition(lambda self: bool(self.submissions) and bool(self._turnable()))
    @rule(data=st.data())
    def native_turn(self, data: st.DataObject) -> None:
        """A worker claims; a first claim's request is refused by the provider before
        admission, a claim after the refusal recovery has its turn consumed with the evidence
        read's outcome unknown; the worker retains it under its lease and fails the request."""
        run = self.model.runs[data.draw(st.sampled_from(self._turnable()))]
        first = run.claims == 0
        stub = self._worker()
        got = self.call(
            "worker",
            "claim",
            {"run_id": run.run_id, "execution_request_id": run.execution_request_id},
            lambda: stub.ClaimExecutionRequest(self._claim_request(run)),
            claim_acknowledged,
        )
        self.expect("native_claim", self.model.predict_claim(run), got)
        self.model.claimed(run)
        run.owner = "worker-token"
        claimed = got.response.execution_request
        if claimed.lease.generation != run.generation:
            raise Divergence(f"claim granted generation {claimed.lease.generation}")
        ledgers = self._ledgers("worker-token")
        if first:
            sent = refused_first_request(
                ledgers, claimed, run.run_id, run.request_id, self.stack.provider
            )
            if self._refused is None:
                source = ledgers.reader.GetRun(ledger_pb2.GetRunRequest(run_id=run.run_id)).run
                review, corrective = _pinned_evidence(ledgers.writer, source.source_revision, sent)
                self.refusals[id(self.stack)] = (self.stack, (sent, review, corrective))
        else:
            assert self._refused is not None  # a refusal was recovered before
            source = ledgers.reader.GetRun(ledger_pb2.GetRunRequest(run_id=run.run_id)).run
            consumed_with_unknown_read(ledgers, claimed, source, run.request_id, self._refused[0])
        reason = "provider_rejected_request" if first else "agentic_tool_unknown"
        got = self.call(
            "worker",
            "fail",
            {
                "run_id": run.run_id,
                "execution_request_id": run.execution_request_id,
                "lease_generation": run.generation,
            },
            lambda: stub.FailExecutionRequest(
                execution_pb2.FailExecutionRequestRequest(
                    execution_request_id=run.execution_request_id,
                    lease_generation=run.generation,
                    reason=reason,
                )
            ),
        )
        self.expect("native_fail", self.model.predict_finish(run, FAILED), got)
        self.model.finished(run, FAILED)
        state = self.recoveries.of(run)
        if first:
            state.refused_turn = True
        else:
            state.consumed_turn = True

    # -- the two recoveries ------------------------------------------------------------------

    def _evidenced(self, workflow: str) -> list[str]:
        return sorted(
            r
            for r in self.submissions
            if self.recoveries.native_evidence(self.model.runs[r], workflow)
            and workflow not in self.recoveries.of(self.model.runs[r]).native
        )

    @precondition(
        lambda self: (
            bool(self.submissions)
            and self._refused is not None
            and (bool(self._evidenced(REFUSAL)) or self.steps % 3 == 1)
        )
    )
    @rule(data=st.data())
    def recover_refusal(self, data: st.DataObject) -> None:
        """The provider-refusal recovery with the administrator's review of the refused
        request (see :meth:`recover_native`)."""
        self.recover_native(data, REFUSAL)

    @precondition(
        lambda self: (
            bool(self.submissions) and (bool(self._evidenced(OBSERVATION)) or self.steps % 7 == 6)
        )
    )
    @rule(data=st.data())
    def recover_observation(self, data: st.DataObject) -> None:
        """The read-only observation recovery (see :meth:`recover_native`)."""
        self.recover_native(data, OBSERVATION)

    def recover_native(self, data: st.DataObject, workflow: str) -> None:
        """An administrator reads the workflow's candidate and submits a new recovery id: the
        original operator or another administrator; as reviewed, with an acknowledgement
        missing, or with a digest that is not the candidate's."""
        attempts = self.__dict__.setdefault("native_attempts", Counter())
        actor, variant = VARIANTS[attempts[workflow] % len(VARIANTS)]
        attempts[workflow] += 1
        preferred = self._evidenced(workflow)
        run = self.model.runs[data.draw(st.sampled_from(preferred or sorted(self.submissions)))]
        candidate = self._candidate(run, workflow, actor)
        held = self.recoveries.native_held(run, workflow)
        if actor == ORIGINAL_OPERATOR and candidate.eligible == held:
            holds = [(common_pb2.HoldReason.Name(h.reason), h.detail) for h in candidate.holds]
            raise Divergence(
                f"the {workflow} candidate is eligible={candidate.eligible} (holds {holds}), "
                f"the spec held={held}"
            )
        digest = candidate.candidate_digest if variant != "stale" else "sha256:" + "0" * 64
        submission = self._submission(run, workflow, f"rec-{uuid.uuid4().hex[:10]}", digest)
        if variant == "unacknowledged":
            names = ACKNOWLEDGEMENTS[workflow]
            setattr(submission, data.draw(st.sampled_from(names)), False)
        predicted = self.recoveries.predict_native(
            run,
            workflow,
            actor,
            submission.recovery_id,
            digest,
            variant != "stale",
            variant != "unacknowledged",
        )
        sweeps = self.recoveries.reaches_the_commit(predicted) and bool(self.model.due())
        got = self._submit_native(run, workflow, actor, submission, sweeps)
        self.expect(OPERATION[workflow], predicted, got)
        if sweeps:
            self.model.expire_due()
        if not got.answer.ok:
            return
        requeued = got.response.outcome.execution_request
        if not got.response.created:
            raise Divergence(f"a new {workflow} recovery id answered created=false")
        if (
            requeued.execution_request_id != run.execution_request_id
            or requeued.lease.generation != run.generation
            or requeued.state != common_pb2.EXECUTION_REQUEST_STATE_QUEUED
        ):
            raise Divergence(f"the {workflow} recovery requeued {requeued}")
        stored = StoredRecovery(submission.recovery_id, actor, digest, self.model.now)
        self.recoveries.recovered_native(run, workflow, stored)
        self._native_submissions()[(run.run_id, workflow)] = (actor, submission)

    def _candidate(
        self, run: RunModel, workflow: str, actor: str
    ) -> candidate_pb2.RecoveryCandidate:
        stub = candidate_pb2_grpc.CandidateServiceStub(self._channel("candidate", actor))
        if workflow == REFUSAL:
            assert self._refused is not None
            return stub.GetRejectedBoundaryCandidate(
                candidate_pb2.GetRejectedBoundaryCandidateRequest(
                    run_id=run.run_id,
                    request_id=run.request_id,
                    reviewed_rejection=self._refused[1],
                )
            ).candidate
        return stub.GetReadonlyObservationCandidate(
            candidate_pb2.GetReadonlyObservationCandidateRequest(
                run_id=run.run_id, request_id=run.request_id
            )
        ).candidate

    def _submission(
        self, run: RunModel, workflow: str, recovery_id: str, digest: str
    ) -> Submission:
        common: dict[str, Any] = {
            "run_id": run.run_id,
            "request_id": run.request_id,
            "recovery_id": recovery_id,
            "candidate_digest": digest,
            "valid_for_seconds": 900,
        }
        if workflow == REFUSAL:
            assert self._refused is not None
            _, review, corrective = self._refused
            return admission_pb2.RequestRejectedBoundaryRecoveryRequest(
                **common,
                reviewed_rejection=review,
                corrective_provider=corrective,
                **dict.fromkeys(REFUSAL_ACKNOWLEDGEMENTS, True),
            )
        return admission_pb2.RequestReadonlyObservationRecoveryRequest(
            **common, **dict.fromkeys(OBSERVATION_ACKNOWLEDGEMENTS, True)
        )

    def _submit_native(
        self,
        run: RunModel,
        workflow: str,
        actor: str,
        submission: Submission,
        sweeps: bool = False,
    ) -> Any:
        stub = admission_pb2_grpc.AdmissionServiceStub(self._channel("admission", actor))
        if isinstance(submission, admission_pb2.RequestRejectedBoundaryRecoveryRequest):
            refusal = submission

            def send() -> Any:
                return stub.RequestRejectedBoundaryRecovery(refusal)

        else:
            observation = submission

            def send() -> Any:
                return stub.RequestReadonlyObservationRecovery(observation)

        return self.call(
            actor,
            OPERATION[workflow],
            {
                "run_id": run.run_id,
                "execution_request_id": run.execution_request_id,
                "recovery_id": submission.recovery_id,
            },
            send,
            _created,
            lambda _: sweeps,  # a refused commit's sweep stands (the model expires it too)
        )

    @precondition(lambda self: bool(self._native_submissions()))
    @rule(data=st.data(), same_actor=st.sampled_from((True, True, False)))
    def replay_native_recovery(self, data: st.DataObject, same_actor: bool) -> None:
        """A stored provider-refusal or observation recovery again: the saved outcome and
        nothing written; another identity is refused, and so is a repeat after the identity
        expired."""
        submissions = self._native_submissions()
        run_id, workflow = data.draw(st.sampled_from(sorted(submissions)))
        run = self.model.runs[run_id]
        actor, submission = submissions[(run_id, workflow)]
        if not same_actor:
            actor = OTHER_ADMINISTRATOR if actor == ORIGINAL_OPERATOR else ORIGINAL_OPERATOR
        predicted = self.recoveries.predict_native(
            run, workflow, actor, submission.recovery_id, submission.candidate_digest, True, True
        )
        got = self._submit_native(run, workflow, actor, submission)
        self.expect(f"replay_{OPERATION[workflow]}", predicted, got)
        if got.answer.ok and got.response.created:
            raise Divergence(f"a replayed {workflow} recovery was created again")
