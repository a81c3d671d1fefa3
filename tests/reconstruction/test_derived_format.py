"""The derived checkpoint's documents have one writer and one parser (shared/continuity/
derived_format.py): the writer reproduces the bytes reconstructions stored before it existed, and
the parser is its inverse."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.demo.observation_turn import LIST_CALL, LISTED, consumed_turn
from services.reconstruction.domain import reconstruct_invalid_read
from services.reconstruction.domain.observation import reconstruct_readonly_observation
from shared.agent.pending import read_derived_checkpoint
from shared.continuity.canonical import canonical_bytes, sha256_digest
from shared.continuity.derived_format import (
    AppendedResult,
    DerivedClaims,
    DerivedEnvelope,
    Reconstruction,
    Source,
    UncheckedResult,
    parse_envelope,
)
from tests.reconstruction.conftest import load_case

AT = "2026-12-03T07:00:00.000000Z"

#: (derived checkpoint, witness, accounting) digests of the fixtures' reconstructions, recorded
#: from the dict-literal writers this module replaced: a changed byte anywhere fails here.
GOLDEN = {
    "v1_basic": (
        "sha256:b8500159f027d6cb80a19deefdd3727a50eda542c2d0042ed0a19bfa191560e9",
        "sha256:d282a035e6a4cb66c756175c7c8ea6c6df83bdca59c31f378c3e3f860388c8bb",
        "sha256:4eb7af7b0e6947519e152a82b672a90964b477fcd346e6e454c67517b4438db7",
    ),
    "v2_list_sibling": (
        "sha256:4e95c1ea7f52f028aaa6fcd072cfd2fe2b7635099158530973d280fc47a99926",
        "sha256:5fd11ac78f402e31752d7cd7f8159e57019869df9aa2a142f34e81abc88a4c1e",
        "sha256:9335d0235e3729926c1eb52d2261cf2a09da0ddb112a77cf8a1b0cf63e9a4a02",
    ),
    "observation with listing": (
        "sha256:2a1fc23ffc84cabb6c68e001babf2cb1ca13fbae72805a935af4405d72fcb337",
        "sha256:036fb55a7932b0f41d2318346a8b9542113458cab54053f07716398ce713b9fb",
        "sha256:7288021443d069f42df224d57e4c156e7e306acc4b2b46e6b10c4b62d3576984",
    ),
    "observation alone": (
        "sha256:725ee76a186fb282d1573ca05e66f1bdb52f257fe92cc4f802d080c3663d30a7",
        "sha256:2330a9537209f3612bd04d261bb3c6c181f6f2076cc01f2f193b2aea116c20c6",
        "sha256:c3562bd46f18ee3bdf5ba27141e9dbbe482449dad49e98ab76b9972cf87c9bef",
    ),
}


def _invalid_read(name: str) -> Any:
    case = load_case(name)
    return reconstruct_invalid_read(
        case.checkpoint, case.raw_response, case.version, case.consumed_at
    )


def _observation(listing: bool) -> Any:
    turn = consumed_turn("r", AT, source_revision="src", listing=listing)
    retained = {LIST_CALL: LISTED} if listing else {}
    pending = _invalid_read("v1_basic").derived_checkpoint
    return reconstruct_readonly_observation(pending, turn.raw_response, AT, retained)


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    return {
        "v1_basic": _invalid_read("v1_basic"),
        "v2_list_sibling": _invalid_read("v2_list_sibling"),
        "observation with listing": _observation(True),
        "observation alone": _observation(False),
    }


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_the_writer_reproduces_the_recorded_digests(results: dict[str, Any], name: str) -> None:
    result = results[name]
    found = (
        result.derived_checkpoint_digest,
        result.witness_digest,
        sha256_digest(result.accounting_json.encode()),
    )
    assert found == GOLDEN[name]
    envelope = json.loads(result.derived_checkpoint)
    assert envelope["witness_digest"] == result.witness_digest
    assert envelope["accounting_digest"] == sha256_digest(result.accounting_json.encode())


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_a_stored_checkpoint_parses_and_writes_back_to_its_bytes(
    results: dict[str, Any], name: str
) -> None:
    raw = results[name].derived_checkpoint
    record = read_derived_checkpoint(raw)
    assert record.document.canonical() == raw
    claims = DerivedClaims.read(raw)
    assert (claims.checkpoint_digest, claims.consumed_at, claims.witness_digest) == (
        record.document.source.checkpoint_digest,
        record.document.reconstruction.consumed_at,
        record.document.witness_digest,
    )


def test_claims_of_bytes_that_are_no_envelope_are_empty() -> None:
    assert DerivedClaims.read(b"not json") == DerivedClaims(is_json=False, records=False)
    assert DerivedClaims.read(b"[1]") == DerivedClaims(is_json=True, records=False)
    partial = DerivedClaims.read(b'{"source":{"checkpoint_digest":"d"},"reconstruction":7}')
    assert (partial.records, partial.checkpoint_digest, partial.consumed_at) == (False, "d", None)


_text = st.text(max_size=12)
_scalar = st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | _text
_json = st.recursive(
    _scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_object = st.dictionaries(_text, _json, max_size=3)
_digest = st.text("0123456789abcdef", min_size=64, max_size=64).map(lambda h: "sha256:" + h)
_result = st.builds(AppendedResult, _text, _text, _json) | st.builds(
    UncheckedResult, _scalar | st.dictionaries(_text, _scalar, max_size=2)
)
_results = st.lists(_result, max_size=3).map(tuple)
_pin = st.none() | st.fixed_dictionaries({"name": _text, "version": _text, "source_hash": _digest})
_kind = st.one_of(
    st.tuples(st.integers(1, 2), st.none()), st.tuples(st.none(), st.just("readonly_observation"))
)


@st.composite
def envelopes(draw: st.DrawFn) -> DerivedEnvelope:
    version, workflow = draw(_kind)
    return DerivedEnvelope(
        transition=draw(_object),
        target_runtime=draw(st.dictionaries(_text, _text, max_size=3)),
        source=Source(draw(_digest), draw(_digest), draw(_digest), draw(_object), draw(_object)),
        reconstruction=Reconstruction(
            consumed_at=draw(_text),
            appended_results=draw(_results),
            version=version,
            workflow=workflow,
            source_reader=draw(_pin),
        ),
        state=draw(_object),
        state_digest=draw(_digest),
        witness_digest=draw(_digest),
        contract_digest=draw(_digest),
        accounting_digest=draw(_digest),
    )


@given(envelopes())
def test_the_parser_inverts_the_writer(envelope: DerivedEnvelope) -> None:
    written = envelope.canonical()
    assert parse_envelope(json.loads(written)) == envelope
    assert canonical_bytes(parse_envelope(json.loads(written)).to_json()) == written
