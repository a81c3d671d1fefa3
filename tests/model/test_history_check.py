"""The independent history checker (tools/history_check.py) finds each anomaly it names: a lost,
duplicated or phantom write, writes journaled against real-time order, and a ticket event after
the ticket's end, while an idempotent retry and a sweep's expiry are no anomaly."""

from __future__ import annotations

from tools.history_check import Line, Operation, check

RUN = "run-1"
REQUEST = "exr_1"


def admitted(index: int, invoked: int, completed: int) -> Operation:
    return Operation(
        index,
        "operator",
        "admit",
        {"run_id": RUN, "request_id": "req-1"},
        invoked,
        "ok",
        {"execution_request_id": REQUEST},
        completed,
    )


def claimed(index: int, invoked: int, completed: int, outcome: str = "ok") -> Operation:
    return Operation(
        index,
        "worker",
        "claim",
        {"run_id": RUN, "execution_request_id": REQUEST},
        invoked,
        outcome,
        {"lease_generation": 1} if outcome == "ok" else {"code": "FAILED_PRECONDITION"},
        completed,
    )


def journal(*kinds: tuple[str, dict[str, object]]) -> dict[str, list[Line]]:
    return {
        RUN: [Line(sequence, kind, payload) for sequence, (kind, payload) in enumerate(kinds, 1)]
    }


SETTLED = ("migration_settlement", {"request_id": "req-1"})
OWNED = ("ownership_claim", {"execution_request_id": REQUEST})
CLAIMED = ("worker_claimed", {"execution_request_id": REQUEST, "lease_generation": 1})


def test_a_consistent_history_with_a_retry_and_a_sweep_has_no_anomaly() -> None:
    history = [admitted(0, 1, 2), admitted(1, 3, 4), claimed(2, 5, 6)]
    expired = ("request_event", {"execution_request_id": "exr_other", "event": "expired"})
    assert check(history, journal(SETTLED, OWNED, CLAIMED, expired)) == []


def test_a_lost_write_is_found() -> None:
    anomalies = check([admitted(0, 1, 2), claimed(1, 3, 4)], journal(SETTLED, OWNED))
    assert any("worker_claimed" in a and "journaled 0x" in a for a in anomalies), anomalies


def test_a_duplicated_or_phantom_write_is_found() -> None:
    duplicated = check(
        [admitted(0, 1, 2), claimed(1, 3, 4)], journal(SETTLED, OWNED, CLAIMED, CLAIMED)
    )
    assert any("journaled 2x" in a for a in duplicated), duplicated
    phantom = check([admitted(0, 1, 2), claimed(1, 3, 4, "fail")], journal(SETTLED, OWNED, CLAIMED))
    assert any("acknowledged by no write" in a for a in phantom), phantom


def test_writes_out_of_real_time_order_are_found() -> None:
    # the admission was acknowledged (2) before the claim was invoked (3), yet journaled after it
    anomalies = check([admitted(0, 1, 2), claimed(1, 3, 4)], journal(CLAIMED, SETTLED, OWNED))
    assert any("acknowledged first" in a for a in anomalies), anomalies


def test_an_event_after_the_tickets_end_is_found() -> None:
    cancelled = ("request_event", {"execution_request_id": REQUEST, "event": "cancelled"})
    anomalies = check(
        [admitted(0, 1, 2), claimed(1, 5, 6)], journal(SETTLED, OWNED, cancelled, CLAIMED)
    )
    assert any("after its end" in a for a in anomalies), anomalies


def completed(index: int, invoked: int, outcome: str) -> Operation:
    return Operation(
        index,
        "worker",
        "complete",
        {"run_id": RUN, "execution_request_id": REQUEST, "lease_generation": 1},
        invoked,
        outcome,
        {} if outcome == "ok" else {"code": "UNAVAILABLE"},
        None if outcome == "info" else invoked + 1,
    )


COMPLETED = ("request_event", {"execution_request_id": REQUEST, "event": "completed"})


def test_a_write_whose_answer_was_lost_is_journaled_once_or_not_at_all() -> None:
    history = [admitted(0, 1, 2), claimed(1, 3, 4), completed(2, 5, "info")]
    assert check(history, journal(SETTLED, OWNED, CLAIMED, COMPLETED)) == []
    assert check(history, journal(SETTLED, OWNED, CLAIMED)) == []
    # the retry that settled it acknowledged it: still one line
    settled = [*history, completed(3, 8, "ok")]
    assert check(settled, journal(SETTLED, OWNED, CLAIMED, COMPLETED)) == []


def test_a_write_whose_answer_was_lost_journaled_twice_is_found() -> None:
    history = [admitted(0, 1, 2), claimed(1, 3, 4), completed(2, 5, "info")]
    twice = check(history, journal(SETTLED, OWNED, CLAIMED, COMPLETED, COMPLETED))
    assert any("journaled 2x" in a for a in twice), twice
    settled = check(
        [*history, completed(3, 8, "ok")], journal(SETTLED, OWNED, CLAIMED, COMPLETED, COMPLETED)
    )
    assert any("acknowledged 1x, journaled 2x" in a for a in settled), settled


def test_an_unknown_outcome_explains_only_its_own_write() -> None:
    # a lost completion does not excuse a claim nobody acknowledged
    history = [admitted(0, 1, 2), completed(1, 5, "info")]
    anomalies = check(history, journal(SETTLED, OWNED, CLAIMED))
    assert any("worker_claimed" in a and "acknowledged by no write" in a for a in anomalies)


def operation(index: int, f: str, value: dict[str, object], result: dict[str, object]) -> Operation:
    """An acknowledged operation invoked at ``2 * index + 1`` and acknowledged right after."""
    value = {"run_id": RUN, "execution_request_id": REQUEST, **value}
    return Operation(index, "admin", f, value, 2 * index + 1, "ok", result, 2 * index + 2)


FAILED_UNCLAIMED = ("request_failed", {"execution_request_id": REQUEST})
WITNESS = ("recovery_witness", {"recovery_id": "rec-1"})
REQUEUED = ("request_event", {"execution_request_id": REQUEST, "event": "requeued_by_recovery"})


def test_a_recovery_requeues_a_request_that_failed_unclaimed_and_writes_repeat_in_order() -> None:
    """Found by the model: a request failed before any claim, recovered, claimed and failed
    again writes ``request_failed`` twice; each acknowledgement is matched to its own line."""
    history = [
        admitted(0, 1, 2),
        operation(1, "fail_unclaimed", {}, {}),
        operation(2, "recover", {"recovery_id": "rec-1"}, {"created": True}),
        operation(3, "claim", {}, {"lease_generation": 1}),
        operation(4, "fail", {}, {}),
    ]
    kinds = (SETTLED, OWNED, FAILED_UNCLAIMED, WITNESS, REQUEUED, CLAIMED, FAILED_UNCLAIMED)
    assert check(history, journal(*kinds)) == []
    # a claimed request's failure is no unclaimed end: a requeue after it is found
    claimed_first = (SETTLED, OWNED, CLAIMED, FAILED_UNCLAIMED, WITNESS, REQUEUED)
    anomalies = check([*history[:1], history[3], history[1], history[2]], journal(*claimed_first))
    assert any("after its end" in a for a in anomalies), anomalies


def test_a_reconciliation_settlement_ends_the_request_it_decides() -> None:
    settled = (
        "reconciliation_settlement",
        {"execution_request_id": REQUEST, "reconciliation_id": "r"},
    )
    decided = operation(2, "reconcile", {"reconciliation_id": "r"}, {"created": True})
    history = [admitted(0, 1, 2), operation(1, "claim", {}, {"lease_generation": 1}), decided]
    assert check(history, journal(SETTLED, OWNED, CLAIMED, settled)) == []
    late = ("request_event", {"execution_request_id": REQUEST, "event": "completed"})
    anomalies = check(history, journal(SETTLED, OWNED, CLAIMED, settled, late))
    assert any("after its end" in a for a in anomalies), anomalies


RETRY_REQUEST = "exr_2"
RETRY_SETTLED = (
    "reconciliation_settlement",
    {
        "execution_request_id": REQUEST,
        "reconciliation_id": "r",
        "retry_execution_request_id": RETRY_REQUEST,
    },
)
QUEUED_RETRY = (
    "request_event",
    {"execution_request_id": RETRY_REQUEST, "event": "queued_by_reconciliation"},
)


def lost(index: int, f: str, value: dict[str, object]) -> Operation:
    """An operation whose answer was lost (``info``), invoked at ``2 * index + 1``."""
    value = {"run_id": RUN, "execution_request_id": REQUEST, **value}
    return Operation(index, "admin", f, value, 2 * index + 1, "info", {"code": "UNAVAILABLE"})


def test_a_lost_retry_decision_explains_its_settlement_and_the_queued_retry() -> None:
    """A decision to retry whose answer was lost wrote two lines: its settlement and the new
    request's queued line, named only by that settlement. Settled by a retry with the same
    reconciliation id (answered created=false), or not applied at all: no anomaly."""
    claim = operation(1, "claim", {}, {"lease_generation": 1})
    decided = lost(2, "reconcile", {"reconciliation_id": "r"})
    replayed = operation(
        3,
        "reconcile",
        {"reconciliation_id": "r"},
        {"created": False, "retry_execution_request_id": RETRY_REQUEST},
    )
    history = [admitted(0, 1, 2), claim, decided, replayed]
    assert check(history, journal(SETTLED, OWNED, CLAIMED, RETRY_SETTLED, QUEUED_RETRY)) == []
    assert check(history[:3], journal(SETTLED, OWNED, CLAIMED)) == []


def test_a_lost_retry_decision_journaled_twice_or_a_stray_queued_line_is_found() -> None:
    history = [
        admitted(0, 1, 2),
        operation(1, "claim", {}, {"lease_generation": 1}),
        lost(2, "reconcile", {"reconciliation_id": "r"}),
    ]
    twice = check(
        history, journal(SETTLED, OWNED, CLAIMED, RETRY_SETTLED, QUEUED_RETRY, QUEUED_RETRY)
    )
    assert any("queued_by_reconciliation" in a and "journaled 2x" in a for a in twice), twice
    # a queued line no settlement of the lost decision names is explained by nothing
    stray = check(history, journal(SETTLED, OWNED, CLAIMED, QUEUED_RETRY))
    assert any("queued_by_reconciliation" in a and "by no write" in a for a in stray), stray
    # another decision's lost answer does not explain this decision's queued retry
    other = [*history[:2], lost(2, "reconcile", {"reconciliation_id": "other"})]
    foreign = check(other, journal(SETTLED, OWNED, CLAIMED, RETRY_SETTLED, QUEUED_RETRY))
    assert any("queued_by_reconciliation" in a for a in foreign), foreign


def _operation(
    index: int, f: str, value: dict[str, object], result: dict[str, object]
) -> Operation:
    return Operation(
        index, "admin", f, {"run_id": RUN, **value}, 2 * index + 1, "ok", result, 2 * index + 2
    )


def test_a_provider_refusal_recovery_may_requeue_a_request_failed_after_its_claim() -> None:
    request = {"execution_request_id": REQUEST}
    failed = ("request_failed", request)
    recovery = {"recovery_id": "rec-1", **request}
    requeued = ("request_event", {**recovery, "event": "requeued_by_recovery"})
    history = [
        admitted(0, 1, 2),
        claimed(1, 3, 4),
        _operation(2, "fail", request, {}),
        _operation(3, "recover_refusal", recovery, {"created": True}),
    ]
    lines = [SETTLED, OWNED, CLAIMED, failed]
    settled = [("refusal_settlement", recovery), ("recovery_witness", recovery), requeued]
    assert check(history, journal(*lines, *settled)) == []
    # without the recovery's settlement the requeue follows the request's end, as a phantom
    anomalies = check(history[:3], journal(*lines, requeued))
    assert any("after its end" in a for a in anomalies), anomalies
    # a requeue naming a never-claimed recovery cannot follow a failure after a claim
    witnessed = [("recovery_witness", recovery), requeued]
    never_claimed = _operation(3, "recover", recovery, {"created": True})
    anomalies = check([*history[:3], never_claimed], journal(*lines, *witnessed))
    assert any("after its end" in a for a in anomalies), anomalies
