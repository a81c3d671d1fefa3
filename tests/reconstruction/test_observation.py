"""The sealed reconstruction of a consumed turn with an unavailable evidence observation: the
raw response and history kept, exactly the retained and the unavailable results appended,
validation by canonical JSON with JSON types preserved."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from services.demo.observation_turn import EVIDENCE_CALL, LIST_CALL, LISTED, consumed_turn
from services.reconstruction.domain import reconstruct_invalid_read, reproduce_pending_request
from services.reconstruction.domain.observation import reconstruct_readonly_observation
from shared.continuity.canonical import canonical_bytes, digest_of
from shared.runtime.errors import FailedPrecondition

AT = "2026-12-03T07:00:00.000000Z"
UNAVAILABLE = {"status": "observation_unavailable", "reason": "original_read_result_not_retained"}


@pytest.fixture(scope="module")
def pending() -> bytes:
    """The derived checkpoint the consumed continuation request was sent from."""
    from tests.reconstruction.conftest import load_case

    case = load_case("v1_basic")
    return reconstruct_invalid_read(
        case.checkpoint, case.raw_response, case.version, case.consumed_at
    ).derived_checkpoint


def raw(listing: bool = True, **changes: Any) -> bytes:
    turn = consumed_turn("r", AT, source_revision="src", listing=listing)
    body = json.loads(turn.raw_response)
    body.update(changes)
    return json.dumps(body).encode()


def refused(reason: str, call: Any) -> FailedPrecondition:
    with pytest.raises(FailedPrecondition) as error:
        call()
    assert error.value.reason == reason, error.value
    return error.value


def test_the_history_is_kept_and_exactly_the_two_results_are_appended(
    pending: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    def blocked(*args: Any, **kwargs: Any) -> Any:
        raise OSError("network disabled in this test")

    for name in ("create_connection", "getaddrinfo"):
        monkeypatch.setattr(socket, name, blocked)
    monkeypatch.setattr(socket.socket, "connect", blocked)
    result = reconstruct_readonly_observation(pending, raw(), AT, {LIST_CALL: LISTED})
    before, after = json.loads(pending)["state"], json.loads(result.derived_checkpoint)["state"]
    assert after["messages"][: len(before["messages"])] == before["messages"]
    response, request = after["messages"][-2:]
    assert [p["tool_call_id"] for p in response["parts"]] == [EVIDENCE_CALL, LIST_CALL]
    assert {p["tool_call_id"]: p["content"] for p in request["parts"]} == {
        EVIDENCE_CALL: UNAVAILABLE,
        LIST_CALL: LISTED,
    }
    assert after["usage"]["requests"] == before["usage"]["requests"] + 1
    assert after["usage"]["tool_calls"] == before["usage"]["tool_calls"] + 2
    for name in ("limits", "model_settings", "model_request_parameters"):
        assert canonical_bytes(after[name]) == canonical_bytes(before[name])
    # Deterministic: the same inputs give the same bytes.
    again = reconstruct_readonly_observation(pending, raw(), AT, {LIST_CALL: LISTED})
    assert again.derived_checkpoint == result.derived_checkpoint
    # The worker can resume it: the next request carries the unavailable observation.
    assert (
        b"original_read_result_not_retained"
        in reproduce_pending_request(result.derived_checkpoint).wire
    )


def test_the_evidence_call_alone_is_supported(pending: bytes) -> None:
    result = reconstruct_readonly_observation(pending, raw(listing=False), AT, {})
    assert result.calls == ((EVIDENCE_CALL, "read_run_evidence"),)


@pytest.mark.parametrize(
    "retained, element",
    [
        ({}, LIST_CALL),  # the list result was not retained
        ({LIST_CALL: LISTED, "call-x": []}, "call-x"),  # a result for no call
        ({LIST_CALL: LISTED, EVIDENCE_CALL: {"status": "ok"}}, EVIDENCE_CALL),
    ],
)
def test_results_other_than_exactly_the_retained_one_are_refused(
    pending: bytes, retained: dict[str, Any], element: str
) -> None:
    error = refused(
        "OBSERVATION_RECONSTRUCTION_DIVERGED",
        lambda: reconstruct_readonly_observation(pending, raw(), AT, retained),
    )
    assert error.metadata["element"] == element


@pytest.mark.parametrize(
    "alter",
    [
        lambda r: r["usage"].update(details={"reasoning_tokens": "12"}),  # token details
        lambda r: r["usage"].update(cost=float(r["usage"]["cost"])),  # a retained cost field
        lambda r: r.update(model_name=["gpt-4o"]),  # model metadata
    ],
    ids=["token-details", "cost", "model-name"],
)
def test_altered_model_metadata_token_details_or_cost_are_refused(
    pending: bytes, alter: Any
) -> None:
    """A stored response whose fields changed JSON type is not what the pinned SDK keeps: the
    comparison of canonical JSON names the element."""
    envelope = json.loads(pending)
    state = envelope["state"]
    response = next(m for m in reversed(state["messages"]) if m.get("kind") == "response")
    alter(response)
    envelope["state_digest"] = digest_of(state)
    altered = canonical_bytes(envelope)
    with pytest.raises(FailedPrecondition) as error:
        reconstruct_readonly_observation(altered, raw(), AT, {LIST_CALL: LISTED})
    assert error.value.reason in (
        "HISTORY_PREFIX_CHANGED",
        "OBSERVATION_RECONSTRUCTION_DIVERGED",
        "CONSUMED_RESPONSE_UNPARSEABLE",
    ), error.value


def test_a_writable_or_text_answer_is_refused(pending: bytes) -> None:
    body = json.loads(raw())
    calls = body["choices"][0]["message"]["tool_calls"]
    calls[1]["function"] = {"name": "run_command", "arguments": json.dumps({"argv": ["ls"]})}
    refused(
        "SIBLING_CALL_REFUSED",
        lambda: reconstruct_readonly_observation(pending, json.dumps(body).encode(), AT, {}),
    )
    text = json.loads(raw())
    text["choices"][0]["message"]["content"] = "done"
    refused(
        "UNSUPPORTED_RESPONSE_CONTENT",
        lambda: reconstruct_readonly_observation(
            pending, json.dumps(text).encode(), AT, {LIST_CALL: LISTED}
        ),
    )


def test_a_reused_source_reader_result_pins_the_published_reader(
    pending: bytes, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read-only observation proof pins the published historical source reader whose
    retained result it reuses; without one, it names none; with the implementation absent, it
    is refused."""
    from shared.agent import historical
    from shared.continuity.sdk_epochs import PUBLISHED_SOURCE_READER

    result = reconstruct_readonly_observation(pending, raw(), AT, {LIST_CALL: LISTED})
    assert result.witness["source_reader"] == PUBLISHED_SOURCE_READER.pin()
    derived = json.loads(result.derived_checkpoint)
    assert derived["reconstruction"]["source_reader"] == PUBLISHED_SOURCE_READER.pin()
    alone = reconstruct_readonly_observation(pending, raw(listing=False), AT, {})
    assert "source_reader" not in alone.witness
    monkeypatch.setattr(historical, "SOURCE_READER_FILE", tmp_path / "absent.py")
    refused(
        "SOURCE_READER_UNPINNED",
        lambda: reconstruct_readonly_observation(pending, raw(), AT, {LIST_CALL: LISTED}),
    )
