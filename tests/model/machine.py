"""The model run against the real services: a Hypothesis rule-based state machine whose rules
call the public API only, compare each answer with the spec model's prediction, and check the
invariants after every step (docs/reliability.md, "The model").

Every call is recorded in the history (tests/model/history.py) for the independent checker
(tools/history_check), which reads it with the runs' exported audit bundles after each example.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import grpc
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from forge.continuity.v1 import (
    admission_pb2,
    admission_pb2_grpc,
    candidate_pb2,
    candidate_pb2_grpc,
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    ledger_pb2,
    ledger_pb2_grpc,
    policy_pb2,
    policy_pb2_grpc,
)
from services.demo.seed import (
    CONFIGURATION_DIGEST,
    SEEDED_SOURCE_REVISION,
    load_fixture,
    seed_held_run,
)
from shared.continuity.qualification import DEFAULT_QUALIFIED_PROFILE
from shared.contract.terms import enum_short_name
from tests.admission.conftest import submission as operator_submission
from tests.model.checking import (
    JOURNAL_TABLES,
    Called,
    Divergence,
    check_history,
    checked_call,
    claim_acknowledged,
    pending_requests,
    runs_with_two_tickets,
)
from tests.model.harness import ModelStack
from tests.model.history import History
from tests.model.native_recovery_rules import NativeRecoveryRules
from tests.model.race_rules import RaceRules
from tests.model.recovery_model import ORIGINAL_OPERATOR as OPERATOR
from tests.model.recovery_rules import RecoveryRules
from tests.model.spec_model import (
    CANCELLED,
    COMPLETED,
    FAILED,
    LEASE_SECONDS,
    OK,
    Answer,
    Policy,
    RunModel,
    SpecModel,
)
from tests.support import row_counts

FIXTURE = load_fixture("v1_basic")
ROOT = Path(__file__).resolve().parents[2]
#: The two workers (tokens); the first claims alone, both race in race_claims.
WORKERS = ("worker-token", "worker2-token")
#: At most this many runs per example: enough for the pending cap to bind.
MAX_RUNS = 4
#: Steps of the model clock, in seconds: each sum stays clear of a lease's edge by more than the
#: real seconds an example takes, so the services and the model never disagree by a moment.
CLOCK_STEPS = (120, 300, 1000)
#: A policy revision's recovery switches: both on (the provider-refusal and the read-only
#: observation recoveries enabled), or one of them off.
SWITCHES = ("both", "both", "no refusal", "both", "no observation")

Response = TypeVar("Response")


@dataclass(frozen=True)
class WorkerSourceFields:
    source_revision: str
    configuration_digest: str
    source_profile: str


class ModelMachine(NativeRecoveryRules, RecoveryRules, RaceRules, RuleBasedStateMachine):
    """One example: fresh runs on the shared services, the model beside them."""

    #: Set by the test before the machine runs (tests/model/test_model.py).
    stack: ModelStack
    history_dir: Any
    examples = 0
    total_steps = 0
    checked_histories = 0
    #: How often each operation got each answer, over every example (the report).
    outcomes: ClassVar[dict[str, int]] = {}

    runs = Bundle("runs")

    def __init__(self) -> None:
        super().__init__()
        type(self).examples += 1
        self.prefix = f"m{uuid.uuid4().hex[:8]}"
        self.history = History(self.history_dir / f"{self.prefix}.history.jsonl")
        self.model = SpecModel(Policy(enabled=True, pending_cap=2))
        #: Each admitted run's submission, replayed as a retrying client would.
        self.submissions: dict[str, admission_pb2.RequestInvalidReadContinuityRequest] = {}
        self.steps = 0
        #: Turns of the ledger replicas (deterministic, so a sequence replays exactly).
        self.spread = 0

    # -- calls -------------------------------------------------------------------------------

    def _channel(self, service: str, token: str) -> grpc.Channel:
        """A channel to ``service``; the ledger's calls go round its replicas in turn."""
        if service == "ledger":
            self.spread += 1
            return self.stack.ledgers[self.spread % len(self.stack.ledgers)].channel(token)
        served = {"candidate": self.stack.candidate, "admission": self.stack.admission}[service]
        return served.channel(token)

    def call(
        self,
        process: str,
        operation: str,
        value: dict[str, Any],
        send: Callable[[], Response],
        acknowledged: Callable[[Response], dict[str, Any]] = lambda _: {},
        refusal_writes: Callable[[Answer], bool] = lambda _: False,
    ) -> Called:
        """One operation through :func:`checked_call`, in this sequence's history."""
        return checked_call(
            self.stack.engine,
            self.history,
            (process, operation, value),
            send,
            acknowledged,
            refusal_writes,
        )

    def expect(self, operation: str, predicted: Answer, got: Called) -> None:
        self.steps += 1
        type(self).total_steps += 1
        outcome = f"{operation} {got.answer.code} {got.answer.reason}".strip()
        type(self).outcomes[outcome] = type(self).outcomes.get(outcome, 0) + 1
        if (got.answer.code, got.answer.reason) != (predicted.code, predicted.reason):
            raise Divergence(
                f"{operation}: the spec requires {predicted.code} {predicted.reason or ''}, "
                f"the services answered {got.answer.code} {got.answer.reason}"
            )

    def advance_clock(self, seconds: float) -> None:
        self.model.advance(seconds)
        self.stack.clock.advance(seconds)

    # -- setup -------------------------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        self._drain()
        self.put_policy(True, 2)

    def _drain(self) -> None:
        """Cancel whatever earlier examples left pending, so the cap counts this example's."""
        admin = execution_pb2_grpc.ExecutionServiceStub(self._channel("ledger", "admin-token"))
        pending = pending_requests(self.stack.engine)
        for execution_request_id in pending:
            admin.CancelExecutionRequest(
                execution_pb2.CancelExecutionRequestRequest(
                    execution_request_id=execution_request_id, reason="model example reset"
                )
            )

    # -- rules -------------------------------------------------------------------------------

    @precondition(lambda self: len(self.model.runs) < MAX_RUNS)
    @rule(target=runs)
    def seed_run(self) -> str:
        run_id = f"{self.prefix}-run-{len(self.model.runs) + 1}"
        writer = ledger_pb2_grpc.LedgerServiceStub(self._channel("ledger", "writer-token"))
        # The platform's writes before the run is held: recorded as one operation whose result
        # names the head they end at, so the checker leaves them out of the acknowledged writes.
        index = self.history.invoke("platform", "seed", {"run_id": run_id})
        seed_held_run(writer, FIXTURE, run_id)
        head = writer.GetRun(ledger_pb2.GetRunRequest(run_id=run_id)).head.sequence
        self.history.complete(index, "ok", {"head_sequence": head})
        self.model.runs[run_id] = RunModel(run_id, held_at=self.model.now)
        return run_id

    # Policy edits and cancellations end what the other rules exercise: taken at every few
    # steps only (deterministic, so Hypothesis replays a sequence exactly).
    @precondition(lambda self: self.steps % 4 == 3)
    @rule(
        enabled=st.sampled_from((True, True, False)),
        cap=st.integers(min_value=1, max_value=3),
        switches=st.sampled_from(SWITCHES),
    )
    def put_policy(self, enabled: bool, cap: int, switches: str = "both") -> None:
        stub = policy_pb2_grpc.PolicyServiceStub(self._channel("ledger", "admin-token"))
        current = stub.GetPolicy(policy_pb2.GetPolicyRequest()).policy
        refusal, observation = switches != "no refusal", switches != "no observation"
        settings = common_pb2.PolicySettings(
            enabled=enabled,
            window_seconds=self.model.policy.window_seconds,
            pending_ticket_limit=cap,
            allow_pre_admission_recovery=refusal,
            allow_readonly_observation_recovery=observation,
        )
        got = self.call(
            "admin",
            "put_policy",
            {"enabled": enabled, "pending_cap": cap},
            lambda: stub.PutPolicy(
                policy_pb2.PutPolicyRequest(expected_revision=current.revision, settings=settings)
            ),
            lambda response: {"revision": response.policy.revision},
        )
        self.expect("put_policy", OK, got)
        self.model.policy_written(enabled, cap, (refusal, observation))

    @rule(run_id=runs)
    def admit(self, run_id: str) -> None:
        run = self.model.runs[run_id]
        candidates = candidate_pb2_grpc.CandidateServiceStub(
            self._channel("candidate", "operator-token")
        )
        candidate = candidates.GetInvalidReadContinuityCandidate(
            candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_id)
        ).candidate
        request_id = f"req-{uuid.uuid4().hex[:10]}"
        submission = operator_submission(candidate, request_id)
        # The ledger's transaction first expires what is due, whatever it then answers.
        expired = self.model.expire_due() if self.model.reaches_the_ledger(run) else []
        predicted = self.model.predict_admit(run)
        got = self._submit(run_id, submission, expires=bool(expired))
        self.expect("admit", predicted, got)
        if got.answer.ok:
            ticket = got.response.ticket
            if ticket.execution_request.lease.seconds != LEASE_SECONDS:
                raise Divergence(f"a queued request's lease is {ticket.execution_request.lease}")
            self.model.admitted(run, request_id, ticket.execution_request.execution_request_id)
            if self.model.pending() > self.model.policy.pending_cap:
                raise Divergence(f"admitted past the pending cap {self.model.policy.pending_cap}")
            self.submissions[run_id] = submission

    def _submit(
        self,
        run_id: str,
        submission: admission_pb2.RequestInvalidReadContinuityRequest,
        expires: bool = False,
    ) -> Called:
        stub = admission_pb2_grpc.AdmissionServiceStub(self._channel("admission", OPERATOR))
        return self.call(
            "operator",
            "admit",
            {"run_id": run_id, "request_id": submission.request_id},
            lambda: stub.RequestInvalidReadContinuity(submission),
            lambda response: {
                "execution_request_id": response.ticket.execution_request.execution_request_id
            },
            lambda _: expires,
        )

    @precondition(lambda self: bool(self.submissions))
    @rule(data=st.data())
    def replay_admission(self, data: st.DataObject) -> None:
        """The same submission again (a client retrying): the same ticket, nothing written."""
        run_id = data.draw(st.sampled_from(sorted(self.submissions)))
        run = self.model.runs[run_id]
        got = self._submit(run_id, self.submissions[run_id])
        self.expect("replay_admission", OK, got)
        answered = got.response.ticket.execution_request.execution_request_id
        if answered != run.ticket_request_id:
            raise Divergence(f"a replayed admission answered {answered}")

    def _worker(self, run: RunModel | None = None) -> execution_pb2_grpc.ExecutionServiceStub:
        """The worker that holds ``run``'s claim (the first worker while nobody does)."""
        token = run.owner if run is not None and run.owner else WORKERS[0]
        return execution_pb2_grpc.ExecutionServiceStub(self._channel("ledger", token))

    def _claim_request(self, run: RunModel) -> execution_pb2.ClaimExecutionRequestRequest:
        return execution_pb2.ClaimExecutionRequestRequest(
            execution_request_id=run.execution_request_id,
            attempt_id=f"{run.run_id}-attempt-1",
            source_revision=FIXTURE_SOURCE.source_revision,
            configuration_digest=FIXTURE_SOURCE.configuration_digest,
            source_profile=FIXTURE_SOURCE.source_profile,
        )

    @precondition(lambda self: bool(self.submissions))
    @rule(data=st.data())
    def claim(self, data: st.DataObject) -> None:
        run = self.model.runs[data.draw(st.sampled_from(sorted(self.submissions)))]
        stub = self._worker()
        predicted = self.model.predict_claim(run)
        leaves_record = self.model.claim_refusal_writes(run, predicted)
        got = self.call(
            "worker",
            "claim",
            {"run_id": run.run_id, "execution_request_id": run.execution_request_id},
            lambda: stub.ClaimExecutionRequest(self._claim_request(run)),
            claim_acknowledged,
            lambda _: leaves_record,
        )
        self.expect("claim", predicted, got)
        if got.answer.ok:
            self._claimed(run, WORKERS[0], got.response)

    def _claimed(
        self, run: RunModel, token: str, response: execution_pb2.ClaimExecutionRequestResponse
    ) -> None:
        self.model.claimed(run)
        run.owner = token
        generation = response.execution_request.lease.generation
        if generation != run.generation:
            raise Divergence(f"claim granted generation {generation}, not {run.generation}")

    @precondition(lambda self: bool(self.submissions))
    @rule(data=st.data())
    def race_claims(self, data: st.DataObject) -> None:
        """Two workers claim one request at the same moment: a claim is exclusive, so at most
        one wins and the other is refused as if it came second (spec 002)."""
        run = self.model.runs[data.draw(st.sampled_from(sorted(self.submissions)))]
        predicted = self.model.predict_claim(run)
        leaves_record = self.model.claim_refusal_writes(run, predicted)
        before = row_counts(self.stack.engine)
        stubs = {token: self._worker_of(token) for token in WORKERS}
        start = threading.Barrier(len(WORKERS))

        def claim_as(token: str) -> Called:
            start.wait(timeout=30)
            return checked_call(
                self.stack.engine,
                self.history,
                (
                    token,
                    "claim",
                    {"run_id": run.run_id, "execution_request_id": run.execution_request_id},
                ),
                lambda: stubs[token].ClaimExecutionRequest(self._claim_request(run)),
                claim_acknowledged,
                refusal_writes=lambda _: True,  # the other's win lands meanwhile: counted below
            )

        with ThreadPoolExecutor(len(WORKERS)) as pool:
            answers = dict(zip(WORKERS, pool.map(claim_as, WORKERS), strict=True))
        winners = [token for token, got in answers.items() if got.answer.ok]
        if predicted.ok:
            # one wins; the loser finds the request claimed
            second = Answer("FAILED_PRECONDITION", "EXECUTION_REQUEST_NOT_QUEUED")
            losers = [got.answer for token, got in answers.items() if token not in winners]
            if len(winners) != 1 or losers != [second]:
                raise Divergence(f"a claim race answered {answers}, the spec one win and {second}")
            self._claimed(run, winners[0], answers[winners[0]].response)
        elif winners or any(got.answer != predicted for got in answers.values()):
            raise Divergence(f"a claim race answered {answers}, the spec {predicted} for both")
        for got in answers.values():
            self.expect("race_claim", OK if got.answer.ok else got.answer, got)
        # what the race wrote: the winner's worker_claimed line (or the refusal's one record)
        lines = int(bool(winners) or leaves_record)
        grown = {t: n - before.get(t, 0) for t, n in row_counts(self.stack.engine).items()}
        expected = {table: lines if table in JOURNAL_TABLES else 0 for table in grown}
        if grown != expected:
            raise Divergence(f"a claim race wrote {grown}, the spec {expected}")

    def _worker_of(self, token: str) -> execution_pb2_grpc.ExecutionServiceStub:
        return execution_pb2_grpc.ExecutionServiceStub(self._channel("ledger", token))

    @precondition(lambda self: bool(self.submissions))
    @rule(data=st.data(), outcome=st.sampled_from((COMPLETED, FAILED)))
    def finish(self, data: st.DataObject, outcome: str) -> None:
        run = self.model.runs[data.draw(st.sampled_from(sorted(self.submissions)))]
        stub = self._worker(run)
        generation = run.generation
        predicted = self.model.predict_finish(run, outcome)
        value = {
            "run_id": run.run_id,
            "execution_request_id": run.execution_request_id,
            "lease_generation": generation,
        }
        if outcome == COMPLETED:
            got = self.call(
                "worker",
                "complete",
                value,
                lambda: stub.CompleteExecutionRequest(
                    execution_pb2.CompleteExecutionRequestRequest(
                        execution_request_id=run.execution_request_id, lease_generation=generation
                    )
                ),
            )
        else:
            got = self.call(
                "worker",
                "fail",
                value,
                lambda: stub.FailExecutionRequest(
                    execution_pb2.FailExecutionRequestRequest(
                        execution_request_id=run.execution_request_id,
                        lease_generation=generation,
                        reason="model_failure",
                    )
                ),
            )
        self.expect(outcome, predicted, got)
        if got.answer.ok:
            self.model.finished(run, outcome)

    @precondition(lambda self: bool(self.submissions))
    @rule(data=st.data(), command=st.integers(min_value=1, max_value=14))
    def record_command(self, data: st.DataObject, command: int) -> None:
        run = self.model.runs[data.draw(st.sampled_from(sorted(self.submissions)))]
        stub = self._worker(run)
        command_id = f"{run.run_id}-cmd-{command}"
        predicted = self.model.predict_command(run, command_id)
        generation = run.generation
        got = self.call(
            "worker",
            "record_command",
            {
                "run_id": run.run_id,
                "execution_request_id": run.execution_request_id,
                "command_id": command_id,
            },
            lambda: stub.RecordCommand(
                execution_pb2.RecordCommandRequest(
                    execution_request_id=run.execution_request_id,
                    lease_generation=generation,
                    command_id=command_id,
                    command_digest="sha256:" + hashlib.sha256(command_id.encode()).hexdigest(),
                )
            ),
            lambda response: {
                "charged": response.charged,
                "journal_sequence": response.journal_sequence,
            },
        )
        self.expect("record_command", predicted, got)
        if got.answer.ok:
            charged = self.model.commanded(run, command_id)
            if got.response.charged != charged and not got.settled:
                raise Divergence(f"{command_id} charged={got.response.charged}, not {charged}")
            if got.response.usage.used != run.commands_used:
                raise Divergence(f"usage {got.response.usage} after {run.commands_used}")

    @precondition(lambda self: bool(self.submissions) and self.steps % 3 == 2)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        run = self.model.runs[data.draw(st.sampled_from(sorted(self.submissions)))]
        stub = execution_pb2_grpc.ExecutionServiceStub(self._channel("ledger", "admin-token"))
        predicted = self.model.predict_cancel(run)
        got = self.call(
            "admin",
            "cancel",
            {"run_id": run.run_id, "execution_request_id": run.execution_request_id},
            lambda: stub.CancelExecutionRequest(
                execution_pb2.CancelExecutionRequestRequest(
                    execution_request_id=run.execution_request_id, reason="model_cancel"
                )
            ),
        )
        self.expect("cancel", predicted, got)
        if got.answer.ok:
            self.model.finished(run, CANCELLED)

    @precondition(lambda self: bool(self.model.due()) or self.steps % 7 == 0)
    @rule()
    def expire_sweep(self) -> None:
        due = {run.execution_request_id for run in self.model.due()}
        stub = execution_pb2_grpc.ExecutionServiceStub(self._channel("ledger", "admin-token"))
        got = self.call(
            "admin",
            "expire",
            {},
            lambda: stub.ExpireExecutionRequests(execution_pb2.ExpireExecutionRequestsRequest()),
            lambda response: {"expired": sorted(r.execution_request_id for r in response.expired)},
        )
        self.expect("expire", OK, got)
        # Requests of earlier examples were all cancelled at the start: only ours can expire.
        expired = {r.execution_request_id for r in got.response.expired}
        if expired != due:
            raise Divergence(f"the sweep expired {sorted(expired)}, the spec {sorted(due)}")
        self.model.expire_due()

    @rule(seconds=st.sampled_from(CLOCK_STEPS))
    def advance(self, seconds: int) -> None:
        self.advance_clock(seconds)

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def requests_are_in_the_modelled_state(self) -> None:
        if not getattr(self, "submissions", None):
            return
        reader = execution_pb2_grpc.ExecutionServiceStub(self._channel("ledger", "admin-token"))
        for run_id in self.submissions:
            run = self.model.runs[run_id]
            request = reader.GetExecutionRequest(
                execution_pb2.GetExecutionRequestRequest(
                    execution_request_id=run.execution_request_id
                )
            ).execution_request
            state = enum_short_name(common_pb2.ExecutionRequestState, request.state).lower()
            if state != self.model.observed(run):
                raise Divergence(
                    f"{run.execution_request_id} reads {state}, the spec {self.model.observed(run)}"
                )

    @invariant()
    def one_ticket_per_run_and_the_pending_count(self) -> None:
        two = runs_with_two_tickets(self.stack.engine, self.prefix)
        if two:
            raise Divergence(f"more than one ticket: {two}")
        pending = len(pending_requests(self.stack.engine))
        if pending != self.model.pending():
            raise Divergence(f"{pending} requests pending, the spec {self.model.pending()}")

    @invariant()
    def every_journal_verifies(self) -> None:
        reader = ledger_pb2_grpc.LedgerServiceStub(self._channel("ledger", "reader-token"))
        for run_id in self.model.runs:
            verified = reader.VerifyJournal(ledger_pb2.VerifyJournalRequest(run_id=run_id))
            if not verified.valid:
                raise Divergence(f"{run_id}'s journal does not verify: {verified}")

    def teardown(self) -> None:
        """Export every run's audit bundle and hand them, with the history, to the independent
        checker (tools/history_check.py), which verifies each with forge-continuity-verify."""
        self.history.close()
        if not self.model.runs:
            return
        checked = check_history(self.stack, self.history.path, self.model.runs, self.history_dir)
        type(self).checked_histories += 1
        if checked.returncode != 0:
            raise Divergence(
                f"the history checker found anomalies:\n{checked.stdout}{checked.stderr}"
            )


#: What the seeded runs were started with, as a worker presents it at its claim.
FIXTURE_SOURCE = WorkerSourceFields(
    SEEDED_SOURCE_REVISION, CONFIGURATION_DIGEST, DEFAULT_QUALIFIED_PROFILE
)
