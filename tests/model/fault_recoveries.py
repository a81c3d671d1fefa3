"""Faults around the recovery and reconciliation rules (ADR 0058; docs/reliability.md, "Faults
between steps"), mixed into the fault machine (tests/model/faults.py).

The fault machine's rules surround one operation each; this part names the recovery ones, the
runs on which the model says each writes (the fault rules steer to those half the time), runs
them, and reads back what a retry cannot safely repeat:

- ``fail_unclaimed``, a ``reconcile`` decision, its ``verify`` and a late write after a retry go to
  the ledger, so to the replica the fault hits (A or B; a cut only reaches A);
- ``recover`` and ``replay_recovery`` are committed through admission, which calls replica B:
  only B's faults (kill, pause, PgBouncer restart) surround them.

Settling a lost answer: a recovery and a reconciliation decision are keyed by the caller (the
recovery id, the reconciliation id) and sent again with the same key, which replays what the
first attempt stored; a failure before a claim is read back by the request's state; a
verification is not keyed (a second call records a second proof), so it is read back from the
reconciliation's inspection first, and sent again only when none is recorded.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from forge.continuity.v1 import reconciliation_pb2, reconciliation_pb2_grpc
from tests.model.checking import Called
from tests.model.race_rules import RaceRules
from tests.model.recovery_model import ORIGINAL_OPERATOR
from tests.model.recovery_rules import DECISIONS, RecoveryRules
from tests.model.spec_model import CLAIMED, COMPLETED, FAILED, OK

#: Ledger operations of the recovery rules a fault can surround (on either replica).
LEDGER_RECOVERIES = ("fail_unclaimed", "verify", "reconcile", "late_write")
#: Committed through admission, so only replica B's faults reach them.
ADMISSION_RECOVERIES = ("recover", "replay_recovery")
#: The races (tests/model/race_rules.py): both sides sent inside the fault.
RACES = ("race_cancel_and_finish", "race_admissions")
RECOVERY_OPERATIONS = frozenset((*LEDGER_RECOVERIES, *ADMISSION_RECOVERIES, *RACES))
#: The decisions that write on a claimed request the verifier clears (the model's own
#: prediction says which of them do on the run drawn): a retry, and the two marks.
WRITING_DECISIONS = tuple(
    (retry, evidence, acknowledged)
    for retry, evidence, acknowledged in DECISIONS
    if (retry and evidence == "stopped" and not acknowledged)
    or (not retry and (evidence == "stopped" or acknowledged))
)
#: The decisions a fault on the verification can meet (only those that ask for one).
VERIFIED_DECISIONS = tuple(d for d in DECISIONS if d[1])


class RecoveryFaults(RecoveryRules, RaceRules):
    """Which recovery operations a fault may surround, which write, and running one."""

    def recovery_operations(self, replica: int, kind: str) -> list[str]:
        """The recovery operations reachable now by a fault of ``kind`` on ``replica``."""
        if not self.submissions:
            return []
        operations = ["fail_unclaimed", "verify", "reconcile"]
        if self._recovering is not None and self._with_reconciled():
            operations.append("late_write")
        if replica == 1 and kind != "cut":
            operations.append("recover")
            if getattr(self, "recovery_submissions", None):
                operations.append("replay_recovery")
        if self._finishable():
            operations.append("race_cancel_and_finish")
        if replica == 1 and kind != "cut" and self._unadmitted():
            operations.append("race_admissions")
        return operations

    def recovery_writes(self, operation: str) -> list[str]:
        """The runs on which ``operation`` writes, by the model (a replay and a fenced late
        write never do)."""
        runs = [self.model.runs[run_id] for run_id in sorted(self.submissions)]
        recoveries = self.recoveries
        if operation == "fail_unclaimed":
            return [r.run_id for r in runs if recoveries.predict_fail_unclaimed(r).ok]
        if operation == "recover":
            return [
                r.run_id
                for r in runs
                if recoveries.predict_recovery(r, ORIGINAL_OPERATOR, "", "", True, True).ok
            ]
        if operation in ("verify", "reconcile"):
            return [r.run_id for r in runs if r.state == CLAIMED]
        if operation == "race_cancel_and_finish":
            return self._finishable()  # one of the two always wins
        if operation == "race_admissions":
            model = self.model
            return [r for r in self._unadmitted() if model.predict_admit(model.runs[r]).ok]
        return []

    def run_recovery(
        self, operation: str, data: st.DataObject, rule_data: Any, steer: bool
    ) -> None:
        """Run ``operation`` (``rule_data`` answers its first draw, the run)."""
        if operation == "fail_unclaimed":
            self.fail_unclaimed(rule_data)
        elif operation == "recover":
            # steered: the submission the model says commits; else any the rule makes
            variants = ("as reviewed",) if steer else ("as reviewed", "stale", "unacknowledged")
            variant = data.draw(st.sampled_from(variants), label="variant")
            self.submit_recovery(rule_data, ORIGINAL_OPERATOR, variant)
        elif operation == "replay_recovery":
            self.replay_recovery(rule_data, same_actor=True)
        elif operation == "race_admissions":
            self.race_admissions(rule_data, data.draw(st.booleans(), label="same"))
        elif operation == "race_cancel_and_finish":
            outcome = data.draw(st.sampled_from((COMPLETED, FAILED)), label="outcome")
            self.race_cancel_and_finish(rule_data, outcome)
        elif operation == "late_write":
            self.late_write_after_retry(rule_data, data.draw(st.booleans(), label="complete"))
        else:
            # the fault surrounds the verification (``verify``) or the decision (``reconcile``)
            if operation == "verify":
                choices = VERIFIED_DECISIONS
            elif steer and rule_data.run_id is not None:
                choices = self._writing_decisions(rule_data.run_id)
            else:
                choices = DECISIONS
            retry, evidence, acknowledged = data.draw(st.sampled_from(choices), label="decision")
            self.reconcile(rule_data, retry, evidence, acknowledged)

    def _writing_decisions(self, run_id: str) -> tuple[tuple[bool, str, bool], ...]:
        """The decisions the model says write on ``run_id`` (its verification proving cessation,
        nothing expiring: the fault target's clock never reaches a lease's end)."""
        run = self.model.runs[run_id]
        decide = self.recoveries.decide
        return tuple(
            d for d in WRITING_DECISIONS if decide(run, d[0], d[1] == "stopped", d[2], []).ok
        )

    def verification_read_back(self, value: dict[str, Any]) -> Called | None:
        """The lost verification found recorded for its reconciliation id, or None; raises
        grpc.RpcError while the ledger cannot be read (a resend could then record it twice)."""
        stub = reconciliation_pb2_grpc.ReconciliationServiceStub(
            self._channel("ledger", "admin-token")
        )
        snapshot = stub.InspectReconciliation(
            reconciliation_pb2.InspectReconciliationRequest(
                run_id=value["run_id"],
                execution_request_id=value["execution_request_id"],
                reconciliation_id=value["reconciliation_id"],
            ),
            timeout=10,
        ).snapshot
        mine = [
            v for v in snapshot.verifications if v.reconciliation_id == value["reconciliation_id"]
        ]
        if not mine:
            return None
        response = reconciliation_pb2.VerifyReconciliationResponse(verification=mine[-1])
        return Called(OK, response, settled=True)
