"""The derived checkpoint: exact appended result, accounting once, limits and history kept."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from services.reconstruction.domain import (
    OBSERVATION_UNAVAILABLE,
    analyze_consumed_response,
    reconstruct_invalid_read,
)
from shared.agent.projection import project
from shared.continuity.canonical import canonical_bytes, sha256_digest
from tests.reconstruction.conftest import FIXTURES, Case, load_case

ROOT = Path(__file__).resolve().parents[2]


def _derived(case: Case) -> dict[str, Any]:
    result = reconstruct_invalid_read(
        case.checkpoint, case.raw_response, case.version, case.consumed_at
    )
    derived: dict[str, Any] = json.loads(result.derived_checkpoint)
    return derived


def test_v1_appends_exactly_invalid_query(basic: Case) -> None:
    messages = _derived(basic)["state"]["messages"]
    last = messages[-1]
    assert last["kind"] == "request"
    assert len(last["parts"]) == 1
    part = last["parts"][0]
    assert (part["tool_name"], part["tool_call_id"]) == ("read_run_evidence", "call_ev_1")
    assert canonical_bytes(part["content"]) == b'{"status":"invalid_query"}'


def test_v2_appends_unavailable_observation_for_list_files() -> None:
    parts = _derived(load_case("v2_list_sibling"))["state"]["messages"][-1]["parts"]
    assert [(p["tool_call_id"], p["content"]) for p in parts] == [
        ("call_ev_1", {"status": "invalid_query"}),
        ("call_list_2", OBSERVATION_UNAVAILABLE),
    ]


def test_accounting_charges_response_and_outcome_once_limits_unchanged(basic: Case) -> None:
    result = reconstruct_invalid_read(basic.checkpoint, basic.raw_response, 1, basic.consumed_at)
    before, after = result.accounting["usage_before"], result.accounting["usage_after"]
    response = json.loads(basic.raw_response)["usage"]
    assert after["requests"] == before["requests"] + 1
    assert after["tool_calls"] == before["tool_calls"] + 1
    assert after["input_tokens"] == before["input_tokens"] + response["prompt_tokens"]
    assert after["output_tokens"] == before["output_tokens"] + response["completion_tokens"]
    # Retained counters keep their values; they are not added to their parents again.
    assert after["output_reasoning_tokens"] == before["output_reasoning_tokens"]
    assert result.accounting["limits_unchanged"] is True
    assert result.accounting["command_charge"] == 0
    derived = json.loads(result.derived_checkpoint)
    assert derived["state"]["limits"] == json.loads(basic.checkpoint)["state"]["limits"]


def test_history_prefix_and_original_bytes_unchanged(basic: Case) -> None:
    original = basic.checkpoint
    digest_before = sha256_digest(original)
    derived = _derived(basic)
    projected = project(json.loads(original)["state"]).state
    prefix = derived["state"]["messages"][: len(projected["messages"])]
    assert canonical_bytes(prefix) == canonical_bytes(projected["messages"])
    assert sha256_digest((FIXTURES / "v1_basic" / "checkpoint.json").read_bytes()) == digest_before
    assert derived["source"]["checkpoint_digest"] == digest_before


def test_new_metadata_bound_to_consumption_time_and_original_run(basic: Case) -> None:
    messages = _derived(basic)["state"]["messages"]
    for message in messages[-2:]:
        assert message["timestamp"] == "2026-10-20T10:01:00Z"
        assert message["run_id"] == "run-fixture-basic"
        assert message["conversation_id"] == "conv-run-fixture-basic"


def test_witness_records_projection(basic: Case) -> None:
    result = reconstruct_invalid_read(basic.checkpoint, basic.raw_response, 1, basic.consumed_at)
    witness = result.witness
    assert witness["transition"]["id"].endswith("pydantic-ai-2.58.0-to-2.55.0")
    provenance = witness["sdk_projection"]["telemetry_provenance"]
    assert {k: v["state"] for k, v in provenance.items()} == {
        "telemetry_mcp_url_ids": "none_found",
        "telemetry_mcp_url_tool_names": "none_found",
        "telemetry_mcp_url_toolset_ids": "none_found",
    }
    changes = {c["element"] for c in witness["tool_contract"]["changes"]}
    assert changes == {
        "tools/read_run_evidence/parameters_json_schema",
        "tools/read_run_evidence/description",
    }
    derived = json.loads(result.derived_checkpoint)
    assert "telemetry_mcp_url_ids" not in derived["state"]
    assert derived["witness_digest"] == result.witness_digest


def test_tool_kind_absence_is_witnessed() -> None:
    case = load_case("v1_tool_kind_absent")
    result = reconstruct_invalid_read(case.checkpoint, case.raw_response, 1, case.consumed_at)
    assert {e["original"] for e in result.witness["sdk_projection"]["tool_kind"]} == {"absent"}
    null = load_case("v1_provenance_unknown")
    result = reconstruct_invalid_read(null.checkpoint, null.raw_response, 1, null.consumed_at)
    states = {
        k: v["state"] for k, v in result.witness["sdk_projection"]["telemetry_provenance"].items()
    }
    assert states["telemetry_mcp_url_ids"] == "unknown"
    assert states["telemetry_mcp_url_toolset_ids"] == "none_found"


def test_captured_contract_is_the_installed_worker(basic: Case) -> None:
    result = reconstruct_invalid_read(basic.checkpoint, basic.raw_response, 1, basic.consumed_at)
    contract = result.captured_contract
    assert [t["name"] for t in contract["tools"]] == [
        "read_run_evidence",
        "list_files",
        "read_file",
        "run_command",
    ]
    query = contract["tools"][0]["parameters_json_schema"]
    assert query["additionalProperties"] is False
    wire_names = [t["function"]["name"] for t in contract["wire"]["tools"]]
    assert wire_names == [t["name"] for t in contract["tools"]]


def test_analysis_is_read_only_and_complete(basic: Case) -> None:
    analysis = analyze_consumed_response(basic.checkpoint, basic.raw_response)
    assert analysis.evidence_call_id == "call_ev_1"
    assert analysis.evidence_query == {"run_id": "run-7f3a", "kind": "log", "page": 25}
    assert analysis.accepted_by_advertised_schema and analysis.rejected_by_pinned_validator
    assert analysis.validator_error and "page" in analysis.validator_error
    assert analysis.sibling_calls == () and analysis.unsupported_content == ()
    assert analysis.holds(1) == () and analysis.holds(2) == ()
    sibling = load_case("v2_list_sibling")
    view = analyze_consumed_response(sibling.checkpoint, sibling.raw_response)
    assert [c.tool_call_id for c in view.sibling_calls] == ["call_list_2"]
    assert view.holds(2) == () and [h.reason for h in view.holds(1)] == ["SIBLING_CALL_REFUSED"]


_SCRIPT = """
import sys
from pathlib import Path
from services.reconstruction.domain import reconstruct_invalid_read
d = Path(sys.argv[1])
r = reconstruct_invalid_read((d / "checkpoint.json").read_bytes(),
                             (d / "raw_response.json").read_bytes(), 1, sys.argv[2])
sys.stdout.write(r.derived_checkpoint_digest + " " + r.witness_digest + "\\n")
sys.stdout.flush()
sys.stdout.buffer.write(r.derived_checkpoint)
"""


def test_same_bytes_across_processes(basic: Case) -> None:
    outputs = []
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT, str(FIXTURES / "v1_basic"), basic.consumed_at],
            capture_output=True,
            check=True,
            cwd=ROOT,
            env={"PYTHONPATH": f"{ROOT}:{ROOT / 'shared' / 'gen'}", "PYTHONHASHSEED": seed},
        )
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    header, body = outputs[0].split(b"\n", 1)
    assert header.split()[0].decode() == "sha256:" + hashlib.sha256(body).hexdigest()
    here = reconstruct_invalid_read(basic.checkpoint, basic.raw_response, 1, basic.consumed_at)
    assert here.derived_checkpoint == body
