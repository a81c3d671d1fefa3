"""`make demo`: the whole v1 story on realistic data, checked step by step.

Against the services of `make run` (default targets and dev tokens), or, when none answer, against
services it starts itself on free ports with a throw-away database. Exits non-zero as soon as a
step does not behave as the spec says.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from forge.continuity.v1 import (
    admission_pb2,
    admission_pb2_grpc,
    candidate_pb2,
    candidate_pb2_grpc,
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    inspection_pb2,
    ledger_pb2,
    ledger_pb2_grpc,
    policy_pb2,
    policy_pb2_grpc,
)
from services.demo.audit_story import audit_story
from services.demo.continuation import run_reference_worker
from services.demo.observation_story import observation_story
from services.demo.reconciliation_story import DEMO_VERIFIER, reconciliation_story
from services.demo.recovery_story import never_claimed_story
from services.demo.refusal_story import refusal_story
from services.demo.seed import load_fixture, seed_held_run
from shared.continuity.canonical import digest_of
from shared.contract.channels import open_channel
from shared.contract.terms import enum_short_name
from shared.runtime.config import (
    DEFAULT_GATEWAY_PORT,
    DEFAULT_PORTS,
    GATEWAY_PORT_VARIABLE,
    SERVICE_NAMES,
    target_variable,
)
from shared.runtime.errors import from_rpc_error

TOKENS = {
    "admin": "dev-admin-token",
    "operator": "dev-operator-token",
    "worker": "dev-worker-token",
    "writer": "dev-writer-token",
    "reader": "dev-reader-token",
}
ROOT = Path(__file__).resolve().parents[2]


class StepFailed(Exception):
    """A step did not behave as the spec says."""


def check(condition: bool, what: str) -> None:
    if not condition:
        raise StepFailed(what)
    print(f"    ok  {what}")


def step(title: str) -> None:
    print(f"\n== {title}")


def serving(target: str) -> bool:
    channel = grpc.insecure_channel(target)
    try:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=2
        )
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)
    except grpc.RpcError:
        return False
    finally:
        channel.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Running:
    """The services the stories run against, and where the console shows their runs."""

    targets: dict[str, str]
    #: The gateway's console, e.g. ``http://127.0.0.1:8080/console``.
    console: str
    #: True for `make run`'s services, whose runs stay; False for the demo's own, which stop
    #: (with their throw-away database) when the demo ends.
    stays: bool


@contextmanager
def services() -> Iterator[Running]:
    """Targets of running services: `make run`'s if they answer, else our own."""
    targets = {
        name: os.environ.get(target_variable(name)) or f"127.0.0.1:{DEFAULT_PORTS[name]}"
        for name in SERVICE_NAMES
    }
    if all(serving(target) for target in targets.values()):
        print("using the running services: " + ", ".join(targets.values()))
        port = os.environ.get(GATEWAY_PORT_VARIABLE) or DEFAULT_GATEWAY_PORT
        yield Running(targets, f"http://127.0.0.1:{port}/console", stays=True)
        return
    with tempfile.TemporaryDirectory(prefix="forge-demo-") as workdir:
        ports = {name: _free_port() for name in SERVICE_NAMES}
        env = {
            **os.environ,
            "FORGE_DATABASE_URL": f"sqlite:///{workdir}/demo.db",
            "FORGE_PRINCIPALS_FILE": f"{workdir}/principals.json",
            "FORGE_SIGNING_KEY_FILE": f"{workdir}/signing-key.pem",
            # the demo's own ledger can verify a reconciliation of a local worker process
            "FORGE_RECONCILIATION_VERIFIER": DEMO_VERIFIER,
        }
        arguments = [f"--{name}-port={port}" for name, port in ports.items()]
        # its own gateway port and log file too: nothing of a running `make run` is touched
        gateway_port = _free_port()
        arguments += [f"--gateway-port={gateway_port}", f"--log-file={workdir}/continuity.log"]
        # and no metrics endpoints (their default ports are `make run`'s)
        arguments += [f"--{name}-metrics-port=0" for name in (*SERVICE_NAMES, "gateway")]
        log = Path(workdir) / "services.log"
        with log.open("wb") as sink:
            runner = subprocess.Popen(
                [sys.executable, "-m", "services.runner", *arguments],
                cwd=ROOT,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        targets = {name: f"127.0.0.1:{port}" for name, port in ports.items()}
        try:
            deadline = time.monotonic() + 120
            while not all(serving(target) for target in targets.values()):
                if runner.poll() is not None or time.monotonic() > deadline:
                    raise StepFailed("the services did not start:\n" + log.read_text())
                time.sleep(0.3)
            print("started services: " + ", ".join(targets.values()))
            yield Running(targets, f"http://127.0.0.1:{gateway_port}/console", stays=False)
        finally:
            runner.terminate()
            runner.wait(timeout=60)


def story(targets: dict[str, str], run_id: str) -> None:  # noqa: PLR0915 - one linear narrative
    def ledger(role: str) -> ledger_pb2_grpc.LedgerServiceStub:
        return ledger_pb2_grpc.LedgerServiceStub(open_channel(targets["ledger"], TOKENS[role]))

    policy = policy_pb2_grpc.PolicyServiceStub(open_channel(targets["ledger"], TOKENS["admin"]))
    candidates = candidate_pb2_grpc.CandidateServiceStub(
        open_channel(targets["candidate"], TOKENS["operator"])
    )
    admission = admission_pb2_grpc.AdmissionServiceStub(
        open_channel(targets["admission"], TOKENS["operator"])
    )
    worker = execution_pb2_grpc.ExecutionServiceStub(
        open_channel(targets["ledger"], TOKENS["worker"])
    )

    step(f"A worker held run {run_id} on a rejected evidence read (fixture v1_basic)")
    fixture = load_fixture("v1_basic")
    seeded = seed_held_run(ledger("writer"), fixture, run_id)
    check(len(seeded.entries) > 0, f"journal written: {len(seeded.entries)} native entries")
    usage = worker.GetCommandUsage(execution_pb2.GetCommandUsageRequest(run_id=run_id)).usage
    check((usage.used, usage.limit) == (11, 22), "command ledger at 11 of 22")

    step("A factory administrator enables the policy with a finite window")
    current = policy.GetPolicy(policy_pb2.GetPolicyRequest()).policy
    enabled = policy.PutPolicy(
        policy_pb2.PutPolicyRequest(
            expected_revision=current.revision,
            settings=common_pb2.PolicySettings(enabled=True, window_seconds=3600),
        )
    ).policy
    check(enabled.enabled and enabled.window_seconds == 3600, f"policy revision {enabled.revision}")

    step("An execution operator reads the candidate")
    candidate = candidates.GetInvalidReadContinuityCandidate(
        candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_id)
    ).candidate
    for hold in candidate.holds:
        print(f"    hold {common_pb2.HoldReason.Name(hold.reason)}: {hold.detail}")
    check(candidate.eligible, "the candidate is eligible (no holds)")
    check(
        candidate.proof.rejected_by_pinned_validator,
        f"query rejected: {candidate.proof.query_json}",
    )
    print(f"    candidate digest {candidate.digests.candidate_digest}")

    request = admission_pb2.RequestInvalidReadContinuityRequest(
        run_id=run_id,
        request_id=f"{run_id}-request-1",
        digests=candidate.digests,
        version=1,
        valid_for_seconds=1800,
        acknowledge_no_new_grant=True,
        acknowledge_original_consumption=True,
        acknowledge_renewed_same_attempt_lease=True,
    )
    step("The operator submits the admission, and the response is lost")
    admission.RequestInvalidReadContinuity(request)  # the reply is discarded on purpose
    print("    (response discarded)")

    step("The operator reads the saved outcome back")
    ticket = admission.GetInvalidReadContinuity(
        admission_pb2.GetInvalidReadContinuityRequest(run_id=run_id, request_id=request.request_id)
    ).ticket
    queued = ticket.execution_request
    check(queued.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED, "the continuation is queued")
    check(ticket.claim_sequence == ticket.settlement_sequence + 1, "settlement and claim adjacent")
    print(f"    lease {queued.lease.seconds}s, execution request {queued.execution_request_id}")

    step("Resubmitting the identical request returns the same ticket")
    again = admission.RequestInvalidReadContinuity(request)
    check(not again.created and again.ticket == ticket, "idempotent: no second ticket")
    usage = worker.GetCommandUsage(execution_pb2.GetCommandUsageRequest(run_id=run_id)).usage
    check(usage.used == 11, "command ledger still at 11 of 22 after admission")

    step("The reference worker claims the continuation and continues it (scripted provider)")
    before = ledger("reader").ReadJournal(
        ledger_pb2.ReadJournalRequest(run_id=run_id, page_size=1000)
    )
    continued = run_reference_worker(targets["ledger"], TOKENS["worker"], run_id)
    for line in continued.stdout.splitlines():
        print(f"    {line}")  # each model, tool and command record the worker wrote
    check(continued.returncode == 0, f"the worker completed the request {continued.stderr}")
    consumed_call = fixture.tool_calls[0]  # the consumed response's rejected evidence call
    check(
        len(continued.requests) == 6
        and all(
            sum(
                any(c["id"] == consumed_call["id"] for c in m.get("tool_calls") or [])
                for m in body["messages"]
            )
            == 1
            for body in continued.requests
        ),
        "six provider requests, each with the consumed response once in its history: the "
        "consumed turn is never requested again",
    )
    entries = (
        ledger("reader")
        .ReadJournal(ledger_pb2.ReadJournalRequest(run_id=run_id, page_size=1000))
        .entries
    )
    worker_records = entries[len(before.entries) :]
    completed = json.loads(worker_records[-1].payload_json)
    check(
        completed["event"] == "completed"
        and completed["goal_claim"] == "satisfied"
        and completed["certification"]["certified"],
        "completion records both verdicts apart: the worker claims the goal; the journal "
        "certifies safe completion (no open intent, current generation, no reconciliation)",
    )
    rounds = ledger("reader").GetRun(ledger_pb2.GetRunRequest(run_id=run_id)).run
    check(rounds.completed_rounds == 1, "the run's completed-round count advanced to 1")
    usage = worker.GetCommandUsage(execution_pb2.GetCommandUsageRequest(run_id=run_id)).usage
    old = [e for e in before.entries if e.kind == common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED]
    check(
        (usage.used, usage.limit) == (13, 22) and all(e in entries for e in old),
        f"command ledger at {usage.used} of {usage.limit}, the old eleven receipts unchanged",
    )

    step("The remaining nine commands run under the original limit; the 23rd is refused")
    head = entries[-1].hash

    def native_command(index: int) -> str:
        appended = (
            ledger("writer")
            .AppendJournalEntry(
                ledger_pb2.AppendJournalEntryRequest(
                    run_id=run_id,
                    expected_head_hash=head,
                    kind=common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED,
                    payload_json=json.dumps(
                        {
                            "command_id": f"{run_id}-step-{index}",
                            "command_digest": digest_of({"argv": ["make", f"step-{index}"]}),
                        }
                    ),
                )
            )
            .entry
        )
        return str(appended.hash)

    for index in range(14, 23):
        head = native_command(index)
    usage = worker.GetCommandUsage(execution_pb2.GetCommandUsageRequest(run_id=run_id)).usage
    check(usage.used == 22, "22 of 22 used")
    try:
        native_command(23)
    except grpc.RpcError as refused:
        reason = from_rpc_error(refused).reason
        check(reason == "COMMAND_LIMIT_REACHED", "the 23rd command is refused before it runs")
    else:
        raise StepFailed("the 23rd command was accepted")

    step("The journal")
    entries = (
        ledger("reader")
        .ReadJournal(ledger_pb2.ReadJournalRequest(run_id=run_id, page_size=1000))
        .entries
    )
    for entry in entries:
        kind = enum_short_name(common_pb2.JournalEntryKind, entry.kind)
        print(f"    {entry.sequence:>3}  {kind.lower():<28} {entry.actor:<22} {entry.hash[:19]}")
    verified = ledger("reader").VerifyJournal(ledger_pb2.VerifyJournalRequest(run_id=run_id))
    check(verified.valid, f"hash chain verifies ({verified.entries_checked} entries)")
    check(
        [e.hash for e in entries[: len(seeded.entries)]] == [e.hash for e in seeded.entries],
        "the original entries are byte-identical",
    )
    settlement = next(
        e for e in entries if e.kind == common_pb2.JOURNAL_ENTRY_KIND_MIGRATION_SETTLEMENT
    )
    epochs = json.loads(settlement.payload_json)["policy_epochs"]
    check(
        epochs["adopted_epoch"]["epoch_id"] == "checkpoint-mode/1"
        and epochs["current_epoch"]["epoch_id"] == "checkpoint-mode/2",
        "the settlement records both policy epochs (historical checkpoint-mode/1, current "
        f"checkpoint-mode/2) bound to {len(epochs['native_references'])} original rows",
    )
    inspected = ledger("reader").InspectJournal(inspection_pb2.InspectJournalRequest(run_id=run_id))
    check(
        all(r.status == inspection_pb2.INSPECTED_RECORD_STATUS_INSPECTED for r in inspected.records)
        and inspected.credential_finding_count == 0,
        f"journal inspection: {len(inspected.records)} records checked, no credential findings "
        "(a read: no SDK object, no lease)",
    )


def settings_of(policy: common_pb2.Policy) -> common_pb2.PolicySettings:
    """The writable settings of a policy revision (every PolicySettings field it carries)."""
    return common_pb2.PolicySettings(
        **{
            field.name: getattr(policy, field.name)
            for field in common_pb2.PolicySettings.DESCRIPTOR.fields
        }
    )


def restore_policy(targets: dict[str, str], original: common_pb2.Policy) -> None:
    """Put back the policy settings the demo found, if the stories changed them (the demo turns
    the policy and two recovery switches on); say what happened either way."""
    policy = policy_pb2_grpc.PolicyServiceStub(open_channel(targets["ledger"], TOKENS["admin"]))
    try:
        current = policy.GetPolicy(policy_pb2.GetPolicyRequest()).policy
        if settings_of(current) == settings_of(original):
            print(f"\nThe policy is as the demo found it (revision {current.revision}).")
            return
        wanted = settings_of(original)
        if wanted.window_seconds < 1:
            # The initial revision (disabled) carries no window a write accepts: the flags are
            # what the demo turned on, and they go back; the window it set stays.
            wanted.window_seconds = current.window_seconds
        restored = policy.PutPolicy(
            policy_pb2.PutPolicyRequest(expected_revision=current.revision, settings=wanted)
        ).policy
    except grpc.RpcError as error:
        print(
            f"\nThe demo changed the policy and could not restore revision {original.revision}'s "
            f"settings ({error.code()} {error.details()}): restore them with 'policy set'.",  # type: ignore[attr-defined]
            file=sys.stderr,
        )
        return
    flags = ", ".join(
        f"{field.name}={str(getattr(restored, field.name)).lower()}"
        for field in common_pb2.PolicySettings.DESCRIPTOR.fields
        if field.type == field.TYPE_BOOL
    )
    print(
        f"\nRestored the policy flags of revision {original.revision} as revision "
        f"{restored.revision} ({flags}); the demo had changed them, and continuations it "
        "admitted stop where a restored flag is off."
    )


def print_console_links(running: Running, run_ids: list[str], keep: bool) -> None:
    """One console link per run the demo created (the console asks for a token once: any of
    the development tokens, e.g. dev-operator-token), printed only when it will work: against
    `make run`'s services, or while ``--keep`` keeps the demo's own serving."""
    if not (running.stays or keep):
        print(
            "\nThe demo's own services and their throw-away database stop as it ends, so it "
            "prints no console links. To open its runs in the console, run `make demo "
            "DEMO_ARGS=--keep` (it serves until Ctrl-C), or start `make run` first."
        )
        return
    print("\nIn the console (enter a development token, e.g. dev-operator-token):")
    for run_id in run_ids:
        print(f"    {running.console}/runs/{quote(run_id, safe='')}")


def keep_serving() -> None:
    """Until Ctrl-C (or SIGTERM): the demo's own services stay up for its console links."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    print("\nThe demo's services keep serving these links: press Ctrl-C to stop them.", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("Stopping the demo's services.", flush=True)


def print_summary() -> None:
    print("\nThe v1 story behaved as the spec says.")
    print("The never-claimed recovery story behaved as the spec says.")
    print("The rejected-boundary recovery story behaved as the spec says.")
    print("The reconciliation story behaved as the spec says.")
    print("The read-only observation recovery story behaved as the spec says.")
    print("The offline audit behaved as the spec says.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.demo", description=__doc__)
    parser.add_argument("--run-id", default=f"demo-{int(time.time())}")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="when the demo started its own services, keep them serving until Ctrl-C",
    )
    args = parser.parse_args(argv)
    stories = ("", "-recovery", "-refusal", "-reconcile", "-observation")
    run_ids = [args.run_id + suffix for suffix in stories]
    try:
        with services() as running:
            targets = running.targets
            admin = policy_pb2_grpc.PolicyServiceStub(
                open_channel(targets["ledger"], TOKENS["admin"])
            )
            original = admin.GetPolicy(policy_pb2.GetPolicyRequest()).policy
            try:
                story(targets, args.run_id)
                never_claimed_story(targets, f"{args.run_id}-recovery", TOKENS, check, step)
                refusal_story(targets, f"{args.run_id}-refusal", TOKENS, check, step)
                reconciliation_story(targets, f"{args.run_id}-reconcile", TOKENS, check, step)
                observation_story(targets, f"{args.run_id}-observation", TOKENS, check, step)
                audit_story(targets, run_ids, TOKENS, check, step)
            finally:
                restore_policy(targets, original)
                print_console_links(running, run_ids, args.keep)
            print_summary()
            if args.keep and not running.stays:
                keep_serving()
    except StepFailed as failure:
        print(f"\nDEMO FAILED: {failure}", file=sys.stderr)
        return 1
    except grpc.RpcError as error:
        print(f"\nDEMO FAILED: {error.code()}: {error.details()}", file=sys.stderr)  # type: ignore[attr-defined]
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
