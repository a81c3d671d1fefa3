"""Faults between the model's steps (ADR 0058; docs/reliability.md, "Faults between steps").

:class:`FaultMachine` is the model machine on the fault target (tests/model/fault_harness.py)
with four fault rules. Each injects its fault around one operation of the model's rules (the
recovery, reconciliation and race rules' are named in tests/model/fault_recoveries.py), sent to
the replica the fault hits:

- **kill**: SIGKILL of a replica a moment after the call is sent (or before), then a restart on
  the same port;
- **cut**: the CuttingProxy armed to cut replica A's connection just before or just after the
  COMMIT of the operation's transaction;
- **pause**: SIGSTOP of a replica while the call waits with a short deadline, then SIGCONT;
- **bouncer**: PgBouncer killed and started again on its port while replica B's call runs.

An answer lost or ambiguous (UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, UNKNOWN, CANCELLED) is an
``info`` outcome in the history, and the machine settles it as a client must: a write keyed by
the caller (an admission's request id, a command's id, a cancellation, a recovery id, a
reconciliation id) is sent again with the same key; a claim, a completion, a failure report and
a failure before a claim are read back first and sent again only when the read shows the change
they make did not happen (a verification: when the inspection shows none); a policy edit (a
compare-and-set on the revision read) is sent again, and refused as stale it proves the lost
attempt applied. The settled answer must be the one the spec predicts for the operation applied
once; a settled refusal must have written nothing since the first attempt (never partially,
never twice).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import grpc
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from forge.continuity.v1 import (
    admission_pb2,
    admission_pb2_grpc,
    candidate_pb2,
    candidate_pb2_grpc,
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    policy_pb2,
    policy_pb2_grpc,
)
from shared.contract.channels import open_channel
from tests.model.checking import JOURNAL_TABLES, Called, Divergence, recorded_send
from tests.model.fault_harness import FaultStack
from tests.model.fault_recoveries import RECOVERY_OPERATIONS, RecoveryFaults
from tests.model.machine import ModelMachine
from tests.model.race_rules import Side, race
from tests.model.spec_model import CLAIMED, COMPLETED, FAILED, OK, PENDING, Answer, RunModel
from tests.reliability.proxy import Mode
from tests.support import row_counts

#: Codes that leave the caller unable to tell whether the write applied.
AMBIGUOUS = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "INTERNAL", "UNKNOWN", "CANCELLED"})
MODES: tuple[Mode, ...] = ("before_commit", "after_commit")
#: How long after sending the call a kill or a PgBouncer restart comes (0: before it is sent).
DELAYS = (0.0, 0.005, 0.02, 0.06)
#: A call to a paused replica waits this long, then it is an unknown outcome.
PAUSED_DEADLINE = 1.0
#: After SIGCONT, what the replica was given while paused finishes before the read back.
THAW_SECONDS = 0.5
#: Settling an unknown outcome: attempts, and the wait between them (a restarted replica, a
#: channel reconnecting after its backoff).
SETTLE_ATTEMPTS = 40
SETTLE_PAUSE = 0.25
#: After a fault is healed, how long the stack may take to answer again through every path.
STEADY_SECONDS = 60.0
#: A policy edit is a compare-and-set on the revision its caller read: a retry refused as stale
#: after a lost answer means the first attempt wrote the next revision (nobody else writes it).
STALE_POLICY = Answer("ABORTED", "POLICY_REVISION_STALE")
#: Execution states a read back shows when the write applied.
APPLIED_STATE = {
    "claim": common_pb2.EXECUTION_REQUEST_STATE_CLAIMED,
    "complete": common_pb2.EXECUTION_REQUEST_STATE_COMPLETED,
    "fail": common_pb2.EXECUTION_REQUEST_STATE_FAILED,
    "fail_unclaimed": common_pb2.EXECUTION_REQUEST_STATE_FAILED,
}
_STATE_NAME = {"claim": CLAIMED, "complete": COMPLETED, "fail": FAILED, "fail_unclaimed": FAILED}
#: The ledger operations a fault can surround (admissions reach only replica B).
LEDGER_OPERATIONS = ("claim", "complete", "fail", "record_command", "cancel", "put_policy")


@dataclass
class Injection:
    """One fault around one call: started as the call is sent, healed when it has answered."""

    kind: str
    #: The replica the call is sent to (0: A, 1: B).
    replica: int
    delay: float = 0.0
    mode: Mode | None = None
    #: The operation it surrounds (None: the rule's first call); the calls before it are sent
    #: to the same replica with no fault (a reconciliation's inspection before its decision).
    target: str | None = None
    _timer: threading.Timer | None = field(default=None, init=False)

    def start(self, stack: FaultStack) -> None:
        if self.kind == "cut":
            stack.proxy.arm(self.mode)
        elif self.kind == "pause":
            stack.replicas[self.replica].freeze()
        else:
            self._timer = threading.Timer(self.delay, self._strike, (stack,))
            self._timer.start()
            if self.delay == 0:
                self._timer.join()

    def _strike(self, stack: FaultStack) -> None:
        if self.kind == "kill":
            stack.replicas[self.replica].kill()
        else:
            stack.bouncer.kill()
            stack.bouncer.start()

    def heal(self, stack: FaultStack) -> None:
        if self.kind == "cut":
            stack.proxy.arm(None)
        elif self.kind == "pause":
            stack.replicas[self.replica].thaw()
            time.sleep(THAW_SECONDS)
        else:
            assert self._timer is not None
            self._timer.join()
            if self.kind == "kill":
                stack.replicas[self.replica].start()


@dataclass
class _Chosen:
    """Hypothesis's data object for one rule, except that the rule's first draw (its run) is
    the one the fault rule chose, when it chose one."""

    data: st.DataObject
    run_id: str | None

    def draw(self, strategy: st.SearchStrategy[Any], label: str | None = None) -> Any:
        if self.run_id is not None:
            chosen, self.run_id = self.run_id, None
            return chosen
        return self.data.draw(strategy, label=label)


class FaultMachine(RecoveryFaults, ModelMachine):
    """The model machine on the fault target, with fault rules and settled unknown outcomes."""

    stack: FaultStack
    #: Faults injected by kind, unknown outcomes and how each was settled (the report).
    faults: ClassVar[dict[str, int]] = {}

    def __init__(self) -> None:
        super().__init__()
        self.injection: Injection | None = None

    @classmethod
    def count(cls, what: str) -> None:
        cls.faults[what] = cls.faults.get(what, 0) + 1

    # -- where calls go ----------------------------------------------------------------------

    def _channel(self, service: str, token: str) -> grpc.Channel:
        """While a fault is pending, the ledger's calls go to the replica it hits, and a call
        to a paused replica (or to admission, which calls B) waits a short deadline only."""
        injection = self.injection
        if injection is None or service == "candidate":
            return super()._channel(service, token)
        timeout = PAUSED_DEADLINE if injection.kind == "pause" else 30.0
        if service == "ledger":
            return open_channel(
                self.stack.ledgers[injection.replica].target, token, default_timeout=timeout
            )
        return open_channel(self.stack.admission.target, token, default_timeout=timeout)

    # -- unknown outcomes --------------------------------------------------------------------

    def call(
        self,
        process: str,
        operation: str,
        value: dict[str, Any],
        send: Callable[[], Any],
        acknowledged: Callable[[Any], dict[str, Any]] = lambda _: {},
        refusal_writes: Callable[[Answer], bool] = lambda _: False,
    ) -> Called:
        """One operation, with the pending fault around it; an unknown outcome is settled."""
        injection = self.injection
        if injection is not None and injection.target not in (None, operation):
            injection = None  # a call before the one the fault surrounds
        elif injection is not None:
            self.injection = None
        before = row_counts(self.stack.engine)
        index = self.history.invoke(process, operation, value)
        if injection is not None:
            injection.start(self.stack)
        try:
            got = self._send(index, send, acknowledged)
        finally:
            if injection is not None:
                injection.heal(self.stack)
                self._steady()
        if got is None:
            type(self).count("info outcomes")
            got = self._settle(process, operation, value, send, acknowledged)
        if not got.answer.ok:
            after = row_counts(self.stack.engine)
            changed = {table for table in after if after[table] != before.get(table)}
            allowed = JOURNAL_TABLES if refusal_writes(got.answer) else frozenset()
            if changed - allowed:
                grown = {table: after[table] - before.get(table, 0) for table in changed}
                raise Divergence(f"{operation} settled as {got.answer} but wrote {grown}")
        return got

    def _raced(self, sides: dict[str, Side]) -> dict[str, Called]:
        """A race with the pending fault around it: started as both sides are released, healed
        when both have answered; a side whose answer was lost is then settled as a lone call's."""
        injection, self.injection = self.injection, None
        if injection is not None:
            injection.start(self.stack)
        try:
            answers = race(self.history, sides, AMBIGUOUS)
        finally:
            if injection is not None:
                injection.heal(self.stack)
                self._steady()
        settled = {}
        for name, answered in answers.items():
            if answered is None:
                type(self).count("info outcomes")
                side = sides[name]
                answered = self._settle(  # noqa: PLW2901 - the lost answer, settled
                    side.process, side.operation, side.value, side.send, side.acknowledged
                )
            settled[name] = answered
        return settled

    def _send(
        self, index: int, send: Callable[[], Any], acknowledged: Callable[[Any], dict[str, Any]]
    ) -> Called | None:
        """Send once and record the outcome; None when it is unknown (``info``)."""
        return recorded_send(self.history, index, send, acknowledged, AMBIGUOUS)

    def _settle(
        self,
        process: str,
        operation: str,
        value: dict[str, Any],
        send: Callable[[], Any],
        acknowledged: Callable[[Any], dict[str, Any]],
    ) -> Called:
        """Resolve an unknown outcome: read back what is not keyed by the caller, send again
        what is (or what the read shows did not apply), until an answer is known."""
        for _ in range(SETTLE_ATTEMPTS):
            if operation == "verify":
                try:
                    found = self.verification_read_back(value)
                except grpc.RpcError:
                    time.sleep(SETTLE_PAUSE)
                    continue  # unread, a resend could record the proof twice
                if found is not None:
                    type(self).count("settled by read back: verify")
                    return found
            if operation in APPLIED_STATE:
                found = self._read_back(operation, value)
                if found is not None:
                    type(self).count(f"settled by read back: {operation}")
                    return found
            index = self.history.invoke(process, operation, value)
            got = self._send(index, send, acknowledged)
            if got is not None and operation == "put_policy" and got.answer == STALE_POLICY:
                return self._policy_written(value)
            if got is not None and not got.answer.ok and operation in APPLIED_STATE:
                # the first attempt may have landed meanwhile (a paused replica let go of it)
                found = self._read_back(operation, value)
                if found is not None:
                    type(self).count(f"settled by read back: {operation}")
                    return found
            if got is not None:
                type(self).count(f"settled by retry: {operation}")
                return Called(got.answer, got.response, settled=True)
            time.sleep(SETTLE_PAUSE)
        raise Divergence(f"{operation} {value}: no answer after {SETTLE_ATTEMPTS} attempts")

    def _policy_written(self, value: dict[str, Any]) -> Called:
        """The lost policy edit applied: the current revision must carry its settings."""
        stub = policy_pb2_grpc.PolicyServiceStub(self._channel("ledger", "admin-token"))
        policy = stub.GetPolicy(policy_pb2.GetPolicyRequest(), timeout=10).policy
        if (policy.enabled, policy.pending_ticket_limit) != (
            value["enabled"],
            value["pending_cap"],
        ):
            raise Divergence(f"a lost policy edit {value} left revision {policy}")
        type(self).count("settled by read back: put_policy")
        return Called(OK, policy_pb2.PutPolicyResponse(policy=policy), settled=True)

    def _read_back(self, operation: str, value: dict[str, Any]) -> Called | None:
        """The write found applied (its answer made from what was read), or None."""
        try:
            reader = execution_pb2_grpc.ExecutionServiceStub(self._channel("ledger", "admin-token"))
            request = reader.GetExecutionRequest(
                execution_pb2.GetExecutionRequestRequest(
                    execution_request_id=value["execution_request_id"]
                ),
                timeout=10,
            ).execution_request
        except grpc.RpcError:
            return None  # not readable yet: the next attempt reads again
        # The model's state is the services' before the call (the invariants held after the
        # last step): the write applied only if the read shows the change it makes.
        run = self.model.runs[value["run_id"]]
        if (
            request.state != APPLIED_STATE[operation]
            or self.model.observed(run) == _STATE_NAME[operation]
        ):
            return None
        if operation == "claim" and request.lease.generation != run.generation + 1:
            return None
        if operation == "claim":
            response: Any = execution_pb2.ClaimExecutionRequestResponse(execution_request=request)
        elif operation == "complete":
            response = execution_pb2.CompleteExecutionRequestResponse()
        else:
            response = execution_pb2.FailExecutionRequestResponse()
        return Called(OK, response, settled=True)

    def _steady(self) -> None:
        """Wait until every path answers again: each replica reads its database (a pool's
        connections cut by the fault are replaced), and the candidate's and admission's channels
        to replica B have reconnected. Any answer but an unknown one will do."""
        run_id = sorted(self.model.runs)[0] if self.model.runs else "model-steady"
        probes: list[Callable[[], object]] = [
            *(
                lambda served=served: policy_pb2_grpc.PolicyServiceStub(
                    served.channel("admin-token")
                ).GetPolicy(policy_pb2.GetPolicyRequest(), timeout=5)
                for served in self.stack.ledgers
            ),
            lambda: candidate_pb2_grpc.CandidateServiceStub(
                self.stack.candidate.channel("operator-token")
            ).GetInvalidReadContinuityCandidate(
                candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_id), timeout=5
            ),
            lambda: admission_pb2_grpc.AdmissionServiceStub(
                self.stack.admission.channel("operator-token")
            ).GetInvalidReadContinuity(
                admission_pb2.GetInvalidReadContinuityRequest(
                    run_id=run_id, request_id="model-steady"
                ),
                timeout=5,
            ),
        ]
        deadline = time.monotonic() + STEADY_SECONDS
        for probe in probes:
            while True:
                try:
                    probe()
                    break
                except grpc.RpcError as error:
                    if error.code().name not in AMBIGUOUS:  # type: ignore[attr-defined]
                        break
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)

    # -- fault rules -------------------------------------------------------------------------

    def advance(self, seconds: int) -> None:
        """No clock rule here: a process's clock is not the model's (ADR 0058)."""

    def _under(self, injection: Injection, data: st.DataObject) -> None:
        """Run one operation the fault hits; with nothing to run, the fault alone."""
        type(self).count(f"fault: {injection.kind}")
        operations = list(LEDGER_OPERATIONS) if self.submissions else []
        if injection.replica == 1 and injection.kind != "cut":
            operations.append("admit")
        operations += self.recovery_operations(injection.replica, injection.kind)
        if not operations:
            injection.start(self.stack)
            injection.heal(self.stack)
            self._steady()
            return
        # Half the time the fault hits an operation the model says will write (a cut around
        # COMMIT needs a COMMIT), on a run where it will; else any, refusals included.
        steer = data.draw(st.booleans(), label="steer")
        writing = {operation: self._writes(operation) for operation in operations}
        if steer and any(writing.values()):
            operations = [operation for operation in operations if writing[operation]]
        operation = data.draw(st.sampled_from(operations), label="operation")
        chosen = writing[operation] if steer else []
        rule_data = _Chosen(
            data, data.draw(st.sampled_from(chosen), label="run") if chosen else None
        )
        type(self).count(f"surrounds: {operation}")
        if operation in ("verify", "reconcile"):
            injection.target = operation  # not the inspection before it
        self.injection = injection
        try:
            if operation in RECOVERY_OPERATIONS:
                self.run_recovery(operation, data, rule_data, steer)
            else:
                self._run(operation, data, rule_data)
        finally:
            if self.injection is not None:  # the operation sent nothing: the fault alone
                self.injection = None
                injection.start(self.stack)
                injection.heal(self.stack)
                self._steady()

    def _run(self, operation: str, data: st.DataObject, rule_data: _Chosen) -> None:
        """Run one of the model's own rules (``rule_data`` answers its first draw, the run)."""
        if operation == "admit":
            runs = st.sampled_from(sorted(self.model.runs))
            self.admit(str(rule_data.draw(runs, label="run")))
        elif operation == "claim":
            self.claim(rule_data)  # type: ignore[arg-type]
        elif operation in ("complete", "fail"):
            self.finish(rule_data, COMPLETED if operation == "complete" else FAILED)  # type: ignore[arg-type]
        elif operation == "record_command":
            command = data.draw(st.integers(1, 14), label="command")
            self.record_command(rule_data, command)  # type: ignore[arg-type]
        elif operation == "put_policy":
            self.put_policy(
                data.draw(st.sampled_from((True, True, False)), label="enabled"),
                data.draw(st.integers(1, 3), label="cap"),
            )
        else:
            self.cancel(rule_data)  # type: ignore[arg-type]

    def _writes(self, operation: str) -> list[str]:
        """The runs on which ``operation`` writes, by the model ("" for a policy edit)."""
        model = self.model
        if operation in RECOVERY_OPERATIONS:
            return self.recovery_writes(operation)
        if operation == "put_policy":
            return [""]
        if operation == "admit":
            return [r.run_id for r in model.runs.values() if model.predict_admit(r).ok]
        predict: dict[str, Callable[[RunModel], Answer]] = {
            "claim": model.predict_claim,
            "complete": lambda run: model.predict_finish(run, COMPLETED),
            "fail": lambda run: model.predict_finish(run, FAILED),
            "record_command": lambda run: model.predict_command(run, f"{run.run_id}-new"),
            "cancel": lambda run: OK if run.state in PENDING else Answer("", ""),
        }
        runs = [model.runs[run_id] for run_id in sorted(self.submissions)]
        return [run.run_id for run in runs if predict[operation](run).ok]

    @precondition(lambda self: bool(self.model.runs))
    @rule(data=st.data(), replica=st.sampled_from((0, 1)), delay=st.sampled_from(DELAYS))
    def kill_replica(self, data: st.DataObject, replica: int, delay: float) -> None:
        self._under(Injection("kill", replica, delay=delay), data)

    @precondition(lambda self: bool(self.submissions))
    @rule(data=st.data(), mode=st.sampled_from(MODES))
    def cut_connection(self, data: st.DataObject, mode: Mode) -> None:
        self._under(Injection("cut", 0, mode=mode), data)

    @precondition(lambda self: bool(self.model.runs))
    @rule(data=st.data(), replica=st.sampled_from((0, 1)))
    def pause_replica(self, data: st.DataObject, replica: int) -> None:
        self._under(Injection("pause", replica), data)

    @precondition(lambda self: bool(self.model.runs))
    @rule(data=st.data(), delay=st.sampled_from(DELAYS))
    def restart_bouncer(self, data: st.DataObject, delay: float) -> None:
        self._under(Injection("bouncer", 1, delay=delay), data)
