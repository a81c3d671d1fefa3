"""Input validation, registered identities and the gRPC servicer translation."""

from __future__ import annotations

import json

import pytest

from forge.continuity.v1 import reconstruction_pb2
from services.reconstruction.domain import reconstruct_invalid_read
from services.reconstruction.servicer import ReconstructionServicer
from shared.agent.evidence import CURRENT_ENVELOPE_SCHEMA
from shared.agent.historical import EVIDENCE_QUERY_26_10_1
from shared.runtime.errors import FailedPrecondition, InvalidArgument
from tests.reconstruction.conftest import Case


@pytest.mark.parametrize("version", [0, 3, -1])
def test_unknown_version(basic: Case, version: int) -> None:
    with pytest.raises(InvalidArgument) as caught:
        reconstruct_invalid_read(basic.checkpoint, basic.raw_response, version, basic.consumed_at)
    assert caught.value.reason == "VERSION_UNSUPPORTED"


@pytest.mark.parametrize("at", ["yesterday", "2026-10-20T10:01:00", "2026-10-20T10:01:00+02:00"])
def test_consumed_at_must_be_utc_rfc3339(basic: Case, at: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        reconstruct_invalid_read(basic.checkpoint, basic.raw_response, 1, at)
    assert caught.value.reason == "CONSUMED_AT_INVALID"


def test_non_canonical_and_malformed_checkpoints(basic: Case) -> None:
    pretty = json.dumps(json.loads(basic.checkpoint), indent=1).encode()
    with pytest.raises(FailedPrecondition) as caught:
        reconstruct_invalid_read(pretty, basic.raw_response, 1, basic.consumed_at)
    assert caught.value.reason == "CHECKPOINT_NOT_CANONICAL"
    with pytest.raises(InvalidArgument):
        reconstruct_invalid_read(b"{not json", basic.raw_response, 1, basic.consumed_at)


def test_unparseable_response_is_refused(basic: Case) -> None:
    with pytest.raises(FailedPrecondition) as caught:
        reconstruct_invalid_read(basic.checkpoint, b"<html>", 1, basic.consumed_at)
    assert caught.value.reason == "CONSUMED_RESPONSE_UNPARSEABLE"


def test_registered_identities() -> None:
    assert (
        EVIDENCE_QUERY_26_10_1.current_source_hash()
        == EVIDENCE_QUERY_26_10_1.registered_source_hash
    )
    page = CURRENT_ENVELOPE_SCHEMA["properties"]["query"]["properties"]["page"]
    assert (page["default"], page["maximum"]) == (10, 10)


@pytest.mark.parametrize(
    "query",
    [
        {"run_id": "run-1", "kind": "log"},
        {"run_id": "run-1", "kind": "log", "page": 10},
        {"run_id": "run-1", "kind": "log", "page": 11},
        {"run_id": "run-1", "kind": "log", "page": 0},
        {"run_id": "run-1", "kind": "trace"},
        {"run_id": "x", "kind": "log"},
        {"run_id": "run-1\n", "kind": "log"},  # a JSON Schema "$" is the end of the text
        {"run_id": "run-1", "kind": "log", "since": "1h"},
        {"run_id": "run-1", "kind": "log", "page": "2"},
    ],
)
def test_envelope_schema_agrees_with_the_validator(query: dict[str, object]) -> None:
    from pydantic import ValidationError

    from services.reconstruction.domain.schema_subset import accepts
    from shared.agent.evidence import EvidenceEnvelope

    try:
        EvidenceEnvelope.model_validate_json(json.dumps({"query": query}))
        valid = True
    except ValidationError:
        valid = False
    assert accepts(CURRENT_ENVELOPE_SCHEMA, {"query": query}) is valid


def test_servicer_translates(basic: Case) -> None:
    servicer = ReconstructionServicer()
    request = reconstruction_pb2.ReconstructInvalidReadRequest(
        checkpoint=basic.checkpoint,
        raw_response=basic.raw_response,
        version=reconstruction_pb2.RECONSTRUCTION_VERSION_V1,
        consumed_at=basic.consumed_at,
    )
    response = servicer.ReconstructInvalidRead(request, None)
    direct = reconstruct_invalid_read(basic.checkpoint, basic.raw_response, 1, basic.consumed_at)
    assert response.derived_checkpoint == direct.derived_checkpoint
    assert response.derived_checkpoint_digest == direct.derived_checkpoint_digest
    assert response.witness_json == direct.witness_json
    assert response.accounting_json == direct.accounting_json
    request.version = reconstruction_pb2.RECONSTRUCTION_VERSION_UNSPECIFIED
    with pytest.raises(InvalidArgument):
        servicer.ReconstructInvalidRead(request, None)
    request.version = reconstruction_pb2.RECONSTRUCTION_VERSION_V1
    request.ClearField("checkpoint")
    with pytest.raises(InvalidArgument) as caught:
        servicer.ReconstructInvalidRead(request, None)
    assert caught.value.metadata == {"field": "checkpoint"}
