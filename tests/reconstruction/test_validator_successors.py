"""Historical query proofs keep their original validator identity: the original reader source
and a reviewed successor whose EvidenceQuery class and JSON schema are unchanged are accepted
after a complete source-hash check; any other source hash is ineligible until reviewed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import MappingProxyType

import pytest
from pydantic import BaseModel

from services.reconstruction.domain.checkpoint import resolve_validator
from shared.agent.historical import (
    EVIDENCE_QUERY_26_10_1,
    REGISTERED_VALIDATORS,
    HistoricalValidator,
    SuccessorRefused,
    reviewed_successor,
    source_hash,
)
from shared.continuity.sdk_epochs import REVIEWED_VALIDATOR_SOURCES, validator_standing
from shared.runtime.errors import DomainError

ORIGINAL = EVIDENCE_QUERY_26_10_1.source_file.read_text(encoding="utf-8")


def load(path: Path) -> type[BaseModel]:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered so pydantic can resolve the postponed annotations of the module.
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    validator: type[BaseModel] = module.EvidenceQuery
    return validator


def successor_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evidence_query_successor.py"
    path.write_text(text, encoding="utf-8")
    return path


def runtime(named: str) -> dict[str, object]:
    return {"evidence_validator": {"source_hash": named}, "advertised_schema_digest": ""}


def test_the_registry_holds_exactly_the_reviewed_sources() -> None:
    assert set(REGISTERED_VALIDATORS) == set(REVIEWED_VALIDATOR_SOURCES)
    for named, validator in REGISTERED_VALIDATORS.items():
        assert validator.current_source_hash() == named
        assert validator_standing(named) is not None


def test_a_reviewed_successor_keeps_the_original_identity(tmp_path: Path) -> None:
    # Same class and schema; only the module's documentation changed, so the source hash differs.
    path = successor_file(tmp_path, ORIGINAL.replace("kept verbatim.", "reviewed successor."))
    successor = reviewed_successor(
        EVIDENCE_QUERY_26_10_1,
        source_file=path,
        registered_source_hash=source_hash(path),
        validator=load(path),
    )
    assert successor.registered_source_hash != EVIDENCE_QUERY_26_10_1.registered_source_hash
    assert successor.identity == EVIDENCE_QUERY_26_10_1.identity
    registry = MappingProxyType(
        {**REGISTERED_VALIDATORS, successor.registered_source_hash: successor}
    )
    with pytest.raises(DomainError) as caught:
        # The advertised schema digest is checked after the validator: the resolution passed.
        resolve_validator(runtime(successor.registered_source_hash), registry)
    assert caught.value.metadata["field"] == "/runtime/advertised_schema_digest"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"log", "artifact", "test"', '"log", "artifact", "test", "trace"'),
        ("le=10", "le=20"),
        ('extra="forbid", strict=True', 'extra="ignore", strict=True'),
        (
            "class EvidenceQuery(BaseModel):",
            "class EvidenceQuery(BaseModel):\n    note: str = ''\n",
        ),
    ],
    ids=["literal", "bound", "config", "field"],
)
def test_a_changed_class_or_schema_is_never_a_successor(tmp_path: Path, old: str, new: str) -> None:
    assert old in ORIGINAL
    path = successor_file(tmp_path, ORIGINAL.replace(old, new))
    with pytest.raises(SuccessorRefused):
        reviewed_successor(
            EVIDENCE_QUERY_26_10_1,
            source_file=path,
            registered_source_hash=source_hash(path),
            validator=load(path),
        )


def test_an_unreviewed_hash_or_a_drifted_source_is_ineligible(tmp_path: Path) -> None:
    with pytest.raises(DomainError) as caught:
        resolve_validator(runtime("sha256:" + "0" * 64))
    assert caught.value.reason == "HISTORICAL_IDENTITY_UNREGISTERED"
    assert validator_standing("sha256:" + "0" * 64) is None
    # A registered hash whose file no longer hashes to it fails the complete source-hash check.
    path = successor_file(tmp_path, ORIGINAL + "\n")
    drifted = HistoricalValidator(
        name=EVIDENCE_QUERY_26_10_1.name,
        source_file=path,
        registered_source_hash=EVIDENCE_QUERY_26_10_1.registered_source_hash,
        validator=EVIDENCE_QUERY_26_10_1.validator,
    )
    registry = MappingProxyType({drifted.registered_source_hash: drifted})
    with pytest.raises(DomainError) as caught:
        resolve_validator(runtime(drifted.registered_source_hash), registry)
    assert caught.value.reason == "HISTORICAL_IDENTITY_UNREGISTERED"
