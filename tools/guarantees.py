"""`make guarantees`: remove each guarantee the docs lean on, one at a time, in a scratch copy of
the working tree, and show the test that defends it failing there.

Each guarantee is one exact edit of one file (the script refuses to run when the text it edits is
gone, so the list cannot silently go stale) and the tests that must fail without it. Prints one
line per guarantee and exits 1 when any removal went unnoticed (or could not be run): a guarantee
no test defends. The repository's own tree is never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: pytest's exit status when tests ran and some failed (anything else: the run itself broke).
TESTS_FAILED = 1


@dataclass(frozen=True)
class Guarantee:
    name: str
    path: str
    remove: tuple[str, str]  # (text that keeps the guarantee, text without it)
    tests: tuple[str, ...]


GUARANTEES = (
    Guarantee(
        "a frozen lock holder loses the lock after the idle limit (ADR 0042)",
        "shared/runtime/config.py",
        (
            "idle_in_transaction_timeout_ms: int = 5_000",
            "idle_in_transaction_timeout_ms: int = 60_000",
        ),
        (
            "tests/ledger/test_frozen_lock_holder.py::"
            "test_a_lock_holder_that_stops_talking_loses_the_lock_within_the_idle_limit",
        ),
    ),
    Guarantee(
        "a streamed snapshot keeps its longer idle limit (ADR 0042)",
        "services/ledger/transactions/snapshot.py",
        ("snapshot=True, streamed=streamed)", "snapshot=True, streamed=False)"),
        (
            "tests/ledger/test_frozen_lock_holder.py::"
            "test_a_streamed_snapshot_waits_for_its_reader_past_the_short_idle_limit",
        ),
    ),
    Guarantee(
        "transaction retries after a lost race (ADR 0016)",
        "services/ledger/transactions/base.py",
        ("TRANSACTION_ATTEMPTS = 6", "TRANSACTION_ATTEMPTS = 1"),
        (
            "tests/ledger/test_postgres_isolation.py::"
            "test_serialization_failures_are_run_again_and_the_cap_still_holds",
        ),
    ),
    Guarantee(
        "the policy lock's re-read after waiting (ADR 0016)",
        "services/ledger/repository/policy.py",
        ("if newest[0] == locked.revision:", "if True:"),
        (
            "tests/ledger/test_policy_lock_reread.py::"
            "test_a_lock_that_waited_behind_a_revocation_judges_the_revocation",
        ),
    ),
    Guarantee(
        "checks read the whole journal, page by page",
        "tests/support.py",
        (
            "        sequence = page.next_sequence\n    return entries",
            "        sequence = 0\n    return entries",
        ),
        (
            "tests/ledger/test_journal.py::test_pages_and_streams_of_large_payloads_stay_within_a_message_budget",
        ),
    ),
    Guarantee(
        "the pending cap's conditional statement keeps concurrent admissions under it (ADR 0049)",
        "services/ledger/repository/execution_requests.py",
        (
            'pending_slots.c.entered - _RELEASED < bindparam("s_limit")',
            'bindparam("s_limit") > -1',
        ),
        (
            "tests/ledger/test_shared_admissions.py::"
            "test_an_admission_waiting_for_the_last_place_is_refused_once_it_is_taken",
            "tests/ledger/test_shared_admissions.py::"
            "test_concurrent_admissions_on_different_runs_fill_the_cap_exactly",
        ),
    ),
    Guarantee(
        "admissions share the policy lock (ADR 0049)",
        "services/ledger/transactions/admission.py",
        (
            "expiry.lock_policy_row(connection, shared=True)",
            "expiry.lock_policy_row(connection, shared=False)",
        ),
        (
            "tests/ledger/test_shared_admissions.py::"
            "test_admissions_on_different_runs_pass_a_shared_holder_and_a_policy_write_does_not",
        ),
    ),
    Guarantee(
        "leases and recorded_at on the database's clock, whatever the host's (ADR 0057)",
        "services/ledger/__main__.py",
        ("            clock if clock is not None else utc_now,\n", "            utc_now,\n"),
        (
            "tests/reliability/test_skewed_clock.py::"
            "test_a_replica_with_a_skewed_clock_decides_leases_on_the_databases_clock",
        ),
    ),
    Guarantee(
        "the worker bounds its effects by the lease on the ledger's clock (ADR 0057)",
        "services/worker/run.py",
        (
            "    return measured_lease(expires, ledger_time, claim.sent_at, wall_clock=utc_now)\n",
            "    return measured_lease(expires, None, claim.sent_at, wall_clock=utc_now)\n",
        ),
        ("tests/worker/test_lease_clock.py::test_the_claimed_lease_ends_on_the_ledgers_clock",),
    ),
    Guarantee(
        "RPC outcome counters start at 0 (rate() sees a first fault)",
        "shared/runtime/metrics.py",
        ("            RPC_HANDLED.labels(service, name, code, reason)\n", "            pass\n"),
        ("tests/shared/runtime/test_metrics.py",),
    ),
    Guarantee(
        "one database timeout raises ForgeDatabaseTimeouts",
        "deploy/prometheus-alerts.yaml",
        (
            'sum(increase(forge_grpc_server_handled_total{reason="DATABASE_TIMEOUT"}[5m])) > 0\n',
            'sum(rate(forge_grpc_server_handled_total{reason="DATABASE_TIMEOUT"}[5m])) > 0.1\n',
        ),
        ("tests/deploy/test_alert_rules.py",),
    ),
)


def scratch_copy(into: Path) -> Path:
    """The working tree's tracked and new files (not ignored ones: no .venv, no var/)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        source = ROOT / raw.decode()
        if source.is_file():
            target = into / raw.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return into


def check(guarantee: Guarantee) -> tuple[bool, str, float]:
    with tempfile.TemporaryDirectory(prefix="guarantee-") as scratch:
        tree = scratch_copy(Path(scratch))
        path = tree / guarantee.path
        text = path.read_text(encoding="utf-8")
        kept, removed = guarantee.remove
        if text.count(kept) != 1:
            return False, f"the text to remove is not in {guarantee.path} exactly once", 0.0
        path.write_text(text.replace(kept, removed), encoding="utf-8")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(str(tree / p) for p in ("", "shared/gen", "tools/audit")),
        }
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-x",
                "-p",
                "no:cacheprovider",
                *guarantee.tests,
            ],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.monotonic() - started
        if done.returncode == TESTS_FAILED:
            return True, "caught", seconds
        if done.returncode == 0:
            return False, "NOT CAUGHT: every test passed without it", seconds
        return (
            False,
            f"could not run (pytest exit {done.returncode}): {done.stdout[-400:]}",
            seconds,
        )


def main() -> int:
    unguarded = 0
    for guarantee in GUARANTEES:
        caught, outcome, seconds = check(guarantee)
        unguarded += not caught
        print(f"{'ok ' if caught else 'GAP'} {guarantee.name}: {outcome} ({seconds:.0f} s)")
        print(f"      removed in {guarantee.path}; defended by {', '.join(guarantee.tests)}")
    return 1 if unguarded else 0


if __name__ == "__main__":
    raise SystemExit(main())
