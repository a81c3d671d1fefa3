"""Wide inputs for the SDK projection: counters and provenance values (hypothesis)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.agent.projection import MAX_COUNTER, project
from shared.runtime.errors import FailedPrecondition
from tests.reconstruction.conftest import load_case

STATE: dict[str, Any] = json.loads(load_case("v1_basic").checkpoint)["state"]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
FAST = settings(max_examples=60, deadline=None)


def _state() -> dict[str, Any]:
    return copy.deepcopy(STATE)


@FAST
@given(output=st.integers(0, MAX_COUNTER), data=st.data())
def test_reasoning_counter_kept_exactly_within_parent(output: int, data: st.DataObject) -> None:
    reasoning = data.draw(st.integers(0, output))
    state = _state()
    usage = state["messages"][1]["usage"]
    usage["output_tokens"], usage["output_reasoning_tokens"] = output, reasoning
    projected = project(state).state["messages"][1]["usage"]
    assert (projected["output_tokens"], projected["output_reasoning_tokens"]) == (output, reasoning)


@FAST
@given(parent=st.integers(0, 10_000), extra=st.integers(1, 10_000))
def test_child_counter_above_parent_is_refused(parent: int, extra: int) -> None:
    state = _state()
    state["usage"]["cache_write_tokens"] = parent
    state["usage"]["cache_write_1h_tokens"] = parent + extra
    with pytest.raises(FailedPrecondition) as caught:
        project(state)
    assert caught.value.reason == "MIGRATION_COUNTER_OUT_OF_BOUNDS"
    assert caught.value.metadata["field"] == "/state/usage/cache_write_1h_tokens"


@FAST
@given(
    value=st.one_of(
        st.integers(max_value=-1),
        st.integers(min_value=MAX_COUNTER + 1),
        st.booleans(),
        st.floats(allow_nan=False),
        st.text(max_size=3),
        st.none(),
    )
)
def test_non_bounded_counter_values_are_refused(value: Any) -> None:
    state = _state()
    state["usage"]["output_reasoning_tokens"] = value
    with pytest.raises(FailedPrecondition) as caught:
        project(state)
    assert caught.value.reason == "MIGRATION_COUNTER_OUT_OF_BOUNDS"
    assert caught.value.metadata["field"] == "/state/usage/output_reasoning_tokens"


@FAST
@given(
    name=st.text(min_size=1, max_size=12).filter(lambda n: n not in STATE["usage"]),
    value=st.integers(0, 100),
)
def test_arbitrary_extra_counters_are_refused(name: str, value: int) -> None:
    state = _state()
    state["usage"][name] = value
    with pytest.raises(FailedPrecondition) as caught:
        project(state)
    assert caught.value.reason == "MIGRATION_COUNTER_UNEXPECTED"


@FAST
@given(
    value=JSON_VALUES,
    field=st.sampled_from(
        ["telemetry_mcp_url_ids", "telemetry_mcp_url_tool_names", "telemetry_mcp_url_toolset_ids"]
    ),
)
def test_provenance_values(value: Any, field: str) -> None:
    state = _state()
    state[field] = value
    allowed = value == [] or (value is None and field != "telemetry_mcp_url_toolset_ids")
    if allowed:
        entry = project(state).witness["telemetry_provenance"][field]
        assert entry["value"] == value
        assert entry["state"] == ("unknown" if value is None else "none_found")
    else:
        with pytest.raises(FailedPrecondition) as caught:
            project(state)
        assert caught.value.metadata["field"] == f"/state/{field}"


def test_projection_never_changes_its_input() -> None:
    state = _state()
    before = json.dumps(state, sort_keys=True)
    project(state)
    assert json.dumps(state, sort_keys=True) == before


def test_history_usage_limits_round_trip_in_canonical_json() -> None:
    from shared.continuity.canonical import canonical_bytes

    state = _state()
    projected = project(state).state
    for key in ("usage", "limits", "model_settings"):
        assert canonical_bytes(projected[key]) == canonical_bytes(state[key])
    for original, after in zip(state["messages"], projected["messages"], strict=True):
        before = {k: v for k, v in original.items() if k != "history_digest"}
        assert canonical_bytes(after) == canonical_bytes(before)


def test_a_null_history_digest_is_omitted_as_a_named_change_with_its_reason() -> None:
    """The spec lists the changes the projection may make; the omitted null history_digest is
    the one it does not name, so the witness records it by name and reason (docs/formats.md)."""
    state = _state()
    responses = [i for i, m in enumerate(state["messages"]) if m["kind"] == "response"]
    omitted = project(state).witness["omitted_null_fields"]
    assert [entry["path"] for entry in omitted] == [
        f"/state/messages/{i}/history_digest" for i in responses
    ]
    for entry in omitted:
        assert entry["value"] is None
        assert entry["change"] == "omit_null_history_digest"
        assert "2.55.0 has no ModelResponse.history_digest" in entry["reason"]


def test_a_non_null_history_digest_is_refused() -> None:
    state = _state()
    response = next(m for m in state["messages"] if m["kind"] == "response")
    response["history_digest"] = "sha256:" + "a" * 64
    with pytest.raises(FailedPrecondition) as refused:
        project(state)
    assert refused.value.reason == "MIGRATION_FIELD_REFUSED"
    assert refused.value.metadata["field"].endswith("/history_digest")
