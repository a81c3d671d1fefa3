"""Races besides two workers claiming one request (tests/model/machine.py's race_claims), mixed into
the machine: two admissions of one run at the same moment, and a cancellation racing the owner's
completion or failure. Each pair is released by a barrier from two threads, as two clients would
send; the model names every answer each order of arrival allows, and the race must leave exactly
one winner and one state."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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
)
from tests.admission.conftest import submission as operator_submission
from tests.model.checking import Called, Divergence, recorded_send
from tests.model.history import History
from tests.model.parts import MachineParts
from tests.model.recovery_model import ORIGINAL_OPERATOR
from tests.model.spec_model import (
    CANCELLED,
    CLAIMED,
    COMPLETED,
    FAILED,
    OK,
    Answer,
    RunModel,
    refused,
)
from tests.support import row_counts

#: What the second of two admissions of one run meets: the first's ticket at the ledger (one
#: ticket per consumed graph), or, when admission recomputes the candidate after that ticket, a
#: candidate no longer the one submitted (the ticket changed what it digests).
SECOND_ADMISSION = frozenset(
    {
        refused("ALREADY_EXISTS", "CONSUMED_GRAPH_ALREADY_ADMITTED"),
        refused("FAILED_PRECONDITION", "CANDIDATE_DIGEST_STALE"),
    }
)


@dataclass
class Side:
    """One side of a race: what it sends, recorded in the history, and how to send it again."""

    process: str
    operation: str
    value: dict[str, Any]
    send: Callable[[], Any]
    acknowledged: Callable[[Any], dict[str, Any]]


def race(
    history: History, sides: dict[str, Side], unknown: frozenset[str] = frozenset()
) -> dict[str, Called | None]:
    """Send the sides from as many threads, released together; each answer is recorded, and
    one whose code is in ``unknown`` is None (its caller settles it)."""
    start = threading.Barrier(len(sides))

    def released(name: str) -> Called | None:
        side = sides[name]
        start.wait(timeout=30)
        index = history.invoke(side.process, side.operation, side.value)
        return recorded_send(history, index, side.send, side.acknowledged, unknown)

    with ThreadPoolExecutor(len(sides)) as pool:
        return dict(zip(sides, pool.map(released, sides), strict=True))


class RaceRules(MachineParts):
    def _raced(self, sides: dict[str, Side]) -> dict[str, Called]:
        """The race's answers. The fault target overrides this: its pending fault surrounds the
        race, and a side whose answer was lost is settled once the fault is healed."""
        answers = race(self.history, sides)
        return {name: got for name, got in answers.items() if got is not None}

    def _race_call(
        self,
        process: str,
        operation: str,
        value: dict[str, Any],
        send: Callable[[], Any],
        acknowledged: Callable[[Any], dict[str, Any]] = lambda _: {},
    ) -> Side:
        """One side of a race. The other side's write lands meanwhile, so what the race wrote
        is counted by the rule, for the pair."""
        return Side(process, operation, value, send, acknowledged)

    def _unadmitted(self) -> list[str]:
        return sorted(r for r, run in self.model.runs.items() if run.state is None)

    @precondition(lambda self: bool(self._unadmitted()) and self.steps % 3 == 1)
    @rule(data=st.data(), same=st.booleans())
    def race_admissions(self, data: st.DataObject, same: bool) -> None:
        """Two admissions of one held run at once: the same submission twice (one ticket, both
        answered with it, one ``created``), or two request ids (one ticket; the other refused as
        the second)."""
        run = self.model.runs[data.draw(st.sampled_from(self._unadmitted()))]
        candidates = candidate_pb2_grpc.CandidateServiceStub(
            self._channel("candidate", ORIGINAL_OPERATOR)
        )
        candidate = candidates.GetInvalidReadContinuityCandidate(
            candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run.run_id)
        ).candidate
        first = operator_submission(candidate, f"req-{uuid.uuid4().hex[:10]}")
        second = first if same else operator_submission(candidate, f"req-{uuid.uuid4().hex[:10]}")
        if self.model.reaches_the_ledger(run):
            self.model.expire_due()  # whatever either then answers
        predicted = self.model.predict_admit(run)
        stub = admission_pb2_grpc.AdmissionServiceStub(
            self._channel("admission", ORIGINAL_OPERATOR)
        )

        def admit(sent: admission_pb2.RequestInvalidReadContinuityRequest) -> Side:
            return self._race_call(
                "operator",
                "admit",
                {"run_id": run.run_id, "request_id": sent.request_id},
                lambda: stub.RequestInvalidReadContinuity(sent),
                lambda response: {
                    "execution_request_id": response.ticket.execution_request.execution_request_id
                },
            )

        before = row_counts(self.stack.engine)["admission_tickets"]
        answers = self._raced({"first": admit(first), "second": admit(second)})
        tickets = row_counts(self.stack.engine)["admission_tickets"] - before
        if tickets != int(predicted.ok):
            raise Divergence(f"an admission race wrote {tickets} tickets, the spec one at most")
        won = {name: got for name, got in answers.items() if got.answer.ok}
        for got in answers.values():
            self.expect("race_admission", got.answer, got)  # judged below, as a pair
        if not predicted.ok:
            if won or any(got.answer != predicted for got in answers.values()):
                raise Divergence(f"an admission race answered {answers}, the spec {predicted}")
            return
        if same:
            answered = {got.response.ticket.SerializeToString() for got in won.values()}
            created = sum(got.response.created for got in won.values())
            # a side settled by a retry after a lost answer is answered created=false even if
            # its first attempt created the ticket
            settled = any(got.settled for got in won.values())
            if (
                len(won) != 2
                or len(answered) != 1
                or not (created == 1 or (settled and created == 0))
            ):
                raise Divergence(f"two identical admissions answered {answers}: one ticket, both")
        else:
            losers = {got.answer for name, got in answers.items() if name not in won}
            if len(won) != 1 or not losers <= SECOND_ADMISSION:
                raise Divergence(f"an admission race answered {answers}, one ticket and a second")
        name, winner = sorted(won.items())[0]
        sent = first if name == "first" else second
        ticket = winner.response.ticket
        self.model.admitted(run, sent.request_id, ticket.execution_request.execution_request_id)
        self.submissions[run.run_id] = sent

    def _finishable(self) -> list[str]:
        """Runs whose claimed request both a cancellation and its owner's completion may end."""
        return sorted(
            run_id
            for run_id in self.submissions
            if self.model.runs[run_id].state == CLAIMED
            and self.model.predict_finish(self.model.runs[run_id], COMPLETED).ok
        )

    @precondition(lambda self: bool(self._finishable()) and self.steps % 2 == 0)
    @rule(data=st.data(), outcome=st.sampled_from((COMPLETED, FAILED)))
    def race_cancel_and_finish(self, data: st.DataObject, outcome: str) -> None:
        """The administrator cancels while the owner completes (or fails): exactly one wins, the
        request ends in its state, and the other is refused as the one that came second."""
        run = self.model.runs[data.draw(st.sampled_from(self._finishable()))]
        before = row_counts(self.stack.engine)["journal_entries"]
        answers = self._raced(
            {"cancel": self._cancel_call(run), outcome: self._finish_call(run, outcome)}
        )
        won = [name for name, got in answers.items() if got.answer.ok]
        second: dict[str, Answer] = {
            # the cancellation first: every later write of the request is fenced by name
            outcome: refused("FAILED_PRECONDITION", "EXECUTION_REQUEST_CANCELLED"),
            # the completion first: an ended request is no longer cancellable
            "cancel": refused("FAILED_PRECONDITION", "EXECUTION_REQUEST_NOT_CANCELLABLE"),
        }
        if len(won) != 1 or [got.answer for name, got in answers.items() if name not in won] != [
            second[name] for name in answers if name not in won
        ]:
            raise Divergence(f"a cancel and a {outcome} raced: {answers}, exactly one wins")
        for name, got in answers.items():
            self.expect(f"race_{name}", OK if name in won else second[name], got)
        self.model.finished(run, CANCELLED if won == ["cancel"] else outcome)
        grown = row_counts(self.stack.engine)["journal_entries"] - before
        if grown != 1:
            raise Divergence(f"a cancel and a {outcome} raced and wrote {grown} journal lines")

    def _cancel_call(self, run: RunModel) -> Side:
        stub = execution_pb2_grpc.ExecutionServiceStub(self._channel("ledger", "admin-token"))
        return self._race_call(
            "admin",
            "cancel",
            {"run_id": run.run_id, "execution_request_id": run.execution_request_id},
            lambda: stub.CancelExecutionRequest(
                execution_pb2.CancelExecutionRequestRequest(
                    execution_request_id=run.execution_request_id, reason="model_cancel"
                )
            ),
        )

    def _finish_call(self, run: RunModel, outcome: str) -> Side:
        stub = self._worker(run)
        request_id, generation = run.execution_request_id, run.generation
        value = {"run_id": run.run_id, "execution_request_id": request_id}
        if outcome == COMPLETED:
            return self._race_call(
                run.owner,
                "complete",
                value,
                lambda: stub.CompleteExecutionRequest(
                    execution_pb2.CompleteExecutionRequestRequest(
                        execution_request_id=request_id, lease_generation=generation
                    )
                ),
            )
        return self._race_call(
            run.owner,
            "fail",
            value,
            lambda: stub.FailExecutionRequest(
                execution_pb2.FailExecutionRequestRequest(
                    execution_request_id=request_id,
                    lease_generation=generation,
                    reason="model_failure",
                )
            ),
        )
