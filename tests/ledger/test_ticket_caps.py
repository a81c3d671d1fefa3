"""The queue caps: defaults 50 per run and 500 pending; an administrator may set any positive
count (larger, as the spec names, and smaller too: a smaller cap only refuses more admissions and
never grants an allowance, see docs/architecture.md "One admission, step by step", step 7).
Each cap refuses with its own reason, the per-run one before the pending one."""

from __future__ import annotations

import pytest

from services.ledger.domain.admission import check_capacity
from services.ledger.domain.policy import PolicyRevision, PolicySettings
from shared.runtime.errors import InvalidArgument, ResourceExhausted


def _policy(per_run: int, pending: int) -> PolicyRevision:
    settings = PolicySettings(
        enabled=True,
        window_seconds=3600,
        per_run_ticket_limit=per_run,
        pending_ticket_limit=pending,
        allow_unavailable_source_observations=False,
        allow_pre_admission_recovery=False,
        allow_readonly_observation_recovery=False,
    ).normalized()
    return PolicyRevision(2, settings, "admin", "2026-10-20T10:00:00.000000Z", "sha256:" + "0" * 64)


@pytest.mark.parametrize(("per_run", "pending"), [(0, 0), (50, 500), (51, 501), (1, 2)])
def test_any_positive_count_is_kept_and_zero_means_the_default(per_run: int, pending: int) -> None:
    settings = _policy(per_run, pending).settings
    assert (settings.per_run_ticket_limit, settings.pending_ticket_limit) == (
        per_run or 50,
        pending or 500,
    )


def test_a_negative_count_is_refused() -> None:
    with pytest.raises(InvalidArgument) as refused:
        _policy(-1, 500)
    assert refused.value.reason == "POLICY_INVALID"


@pytest.mark.parametrize("limit", [1, 50, 51])
def test_the_per_run_limit_refuses_the_ticket_that_would_exceed_it(limit: int) -> None:
    policy = _policy(limit, 500)
    check_capacity(policy, per_run=limit - 1, pending=0)  # the last one that fits
    with pytest.raises(ResourceExhausted) as refused:
        check_capacity(policy, per_run=limit, pending=0)
    assert refused.value.reason == "PER_RUN_TICKET_LIMIT"
    assert refused.value.metadata == {"limit": str(limit), "count": str(limit)}


def test_the_per_run_limit_is_judged_before_the_pending_limit() -> None:
    with pytest.raises(ResourceExhausted) as refused:
        check_capacity(_policy(2, 3), per_run=2, pending=3)
    assert refused.value.reason == "PER_RUN_TICKET_LIMIT"
