"""The client and the CLI read the recovery workflows the services route
(AdmissionService.ListRecoveryWorkflows), against the real services."""

from __future__ import annotations

import json

from shared.continuity.recovery import WORKFLOWS
from tests.client.conftest import CliRunner, lines
from tests.client.test_request_submit import Stack, stack

__all__ = ["stack"]  # the four real services, as a fixture here


def test_any_caller_reads_the_registered_workflows(stack: Stack, cli: CliRunner) -> None:
    with stack.client("reader-token") as client:
        reply = client.recovery_workflows()
    assert [w.name for w in reply.workflows] == list(WORKFLOWS)

    shown = stack.cli(cli, "recovery-workflows", token="reader-token")
    assert (shown.code, shown.err) == (0, "")
    text = lines(shown.out)
    assert text[0] == f"routes relative to {reply.request_path}"
    headings = [line.split(":", 1)[0] for line in text if line and not line.startswith(" ")]
    assert headings[1:] == list(WORKFLOWS)
    assert "    --acknowledge-never-claimed: No worker ever claimed this ticket." in text
    assert any(
        line.split()
        == ["submit:", "POST", "/recoveries/{recovery_id}", "(RequestInvalidReadRecovery)"]
        for line in text
    )
    assert any(line.startswith("    reviewed_rejection (") for line in text)

    as_json = json.loads(stack.cli(cli, "--json", "recovery-workflows", token="worker-token").out)
    assert [w["name"] for w in as_json["workflows"]] == list(WORKFLOWS)
    observation = as_json["workflows"][2]
    assert observation["applies"]["follows"] == ["rejected_boundary"]
    assert observation["policy_switch"] == "allow_readonly_observation_recovery"
