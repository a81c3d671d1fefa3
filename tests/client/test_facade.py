"""The public surface stays whole while the client and CLI are split by workflow: the facade
exposes every workflow's methods, and the CLI lists every module's commands."""

from __future__ import annotations

import inspect

from services.client import ContinuityClient
from services.client.cli import build_parser
from shared.continuity.recovery import WORKFLOWS

PUBLIC_METHODS = {
    "close",
    "from_environment",
    "get_policy",
    "get_run",
    "put_policy",
    "policy_revisions",
    "journal",
    "verify_journal",
    "inspect_journal",
    "command_usage",
    "signing_keys",
    "signed_heads",
    "export_journal",
    "head_feed",
    "watch_heads_once",
    "signing_keys_document",
    "invalid_read_continuity_candidate",
    "request_invalid_read_continuity",
    "invalid_read_continuity",
    "invalid_read_recovery_candidate",
    "request_invalid_read_recovery",
    "invalid_read_recovery",
    "rejected_boundary_recovery_candidate",
    "request_rejected_boundary_recovery",
    "rejected_boundary_recovery",
    "readonly_observation_recovery_candidate",
    "request_readonly_observation_recovery",
    "readonly_observation_recovery",
    "recovery_workflows",
    "inspect_reconciliation",
    "verify_reconciliation",
    "reconcile_execution_request",
    "reconciliation",
    "caller_permissions",
    "execution_requests",
    "list_runs",
    "list_all_execution_requests",
    "cancel_execution_request",
    "expire_execution_requests",
}


def test_the_facade_exposes_every_workflow_method() -> None:
    public = {name for name in dir(ContinuityClient) if not name.startswith("_")}
    assert public == PUBLIC_METHODS


def test_each_recovery_submission_takes_exactly_its_contract_acknowledgements() -> None:
    submissions = {
        "never_claimed": ContinuityClient.request_invalid_read_recovery,
        "rejected_boundary": ContinuityClient.request_rejected_boundary_recovery,
        "readonly_observation": ContinuityClient.request_readonly_observation_recovery,
    }
    for workflow, method in submissions.items():
        parameters = inspect.signature(method).parameters
        taken = [name for name in parameters if name.startswith("acknowledge_")]
        assert tuple(taken) == WORKFLOWS[workflow].acknowledgements
        assert all(parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in taken)


def test_the_cli_lists_every_module_command_in_order() -> None:
    parser = build_parser({})
    listed = parser.format_help().split("  COMMAND\n", 1)[1].split("\n\n", 1)[0]
    names = [line.split()[0] for line in listed.splitlines()]
    assert names == [
        "policy",
        "runs",
        "candidate",
        "request",
        "recovery",
        "recovery-workflows",
        "refusal",
        "observation",
        "reconcile",
        "journal",
        "commands",
        "requests",
        "heads",
        "signing-keys",
        "whoami",
    ]
