"""A version-2 proof pins the published historical source-reader implementation: its name,
version and source hash are in the witness and the derived checkpoint, and a reconstruction whose
installed implementation is absent or differs is refused SOURCE_READER_UNPINNED."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.reconstruction.domain import reconstruct_invalid_read
from services.reconstruction.domain.registry import source_reader_pin
from shared.agent import historical
from shared.agent.historical import source_hash
from shared.continuity.sdk_epochs import PUBLISHED_SOURCE_READER
from shared.runtime.errors import FailedPrecondition
from tests.reconstruction.conftest import Case, load_case

PIN = PUBLISHED_SOURCE_READER.pin()


def test_the_published_implementation_is_installed_with_its_pinned_hash() -> None:
    assert source_hash(historical.SOURCE_READER_FILE) == PUBLISHED_SOURCE_READER.source_hash
    assert source_reader_pin() == PIN
    assert {
        "name": "firefly-agentic/26.10.1/list_files",
        "version": "26.10.1",
        "source_hash": PUBLISHED_SOURCE_READER.source_hash,
    } == PIN


def test_a_version_2_proof_with_a_source_observation_names_the_pin() -> None:
    sibling = load_case("v2_list_sibling")
    result = reconstruct_invalid_read(
        sibling.checkpoint, sibling.raw_response, 2, sibling.consumed_at
    )
    assert result.witness["historical_identities"]["source_reader"] == PIN
    derived = json.loads(result.derived_checkpoint)
    assert derived["reconstruction"]["source_reader"] == PIN
    assert "list_files" in [r["tool_name"] for r in derived["reconstruction"]["appended_results"]]


def test_a_proof_without_a_source_observation_names_none(basic: Case) -> None:
    for version in (1, 2):
        result = reconstruct_invalid_read(
            basic.checkpoint, basic.raw_response, version, basic.consumed_at
        )
        assert "source_reader" not in result.witness["historical_identities"]
        assert "source_reader" not in json.loads(result.derived_checkpoint)["reconstruction"]


@pytest.mark.parametrize("installed", ["changed", "absent"])
def test_an_absent_or_changed_implementation_refuses_the_proof(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, installed: str
) -> None:
    drifted = tmp_path / "source_reader_26_10_1.py"
    if installed == "changed":
        drifted.write_bytes(historical.SOURCE_READER_FILE.read_bytes() + b"\n# patched\n")
    monkeypatch.setattr(historical, "SOURCE_READER_FILE", drifted)
    sibling = load_case("v2_list_sibling")
    with pytest.raises(FailedPrecondition) as refused:
        reconstruct_invalid_read(sibling.checkpoint, sibling.raw_response, 2, sibling.consumed_at)
    assert refused.value.reason == "SOURCE_READER_UNPINNED"
    assert refused.value.metadata["expected"] == PUBLISHED_SOURCE_READER.source_hash
    assert refused.value.metadata["found"] == (source_hash(drifted) if drifted.exists() else "")
    # a proof that takes nothing from the source reader does not need it
    basic = load_case("v1_basic")
    assert reconstruct_invalid_read(basic.checkpoint, basic.raw_response, 2, basic.consumed_at)
