"""The compatibility catalog of checkpoint-mode policy epochs (pure)."""

from __future__ import annotations

import pytest

from shared.continuity.canonical import digest_of
from shared.continuity.policy_epochs import (
    CATALOG_VERSION,
    CURRENT_EPOCH,
    HISTORICAL_EPOCHS,
    ContinuityEpochContext,
    ContinuityNamespace,
    ModeTuple,
    NativeReference,
    catalog_digest,
    catalog_document,
    epoch_receipt,
    mode_tuple_of,
    prepare_mode,
    recognize,
)
from shared.runtime.errors import DomainError

HISTORICAL = next(iter(HISTORICAL_EPOCHS))


def context(**overrides: object) -> ContinuityEpochContext:
    fields: dict[str, object] = {
        "namespace": ContinuityNamespace.PREPARATION,
        "source_profile": "profile-a",
        "profile_qualified": True,
        "policy_enabled": True,
        "lease_window_seconds": 3600,
        "lease_policy_revision": 4,
    }
    fields.update(overrides)
    return ContinuityEpochContext(**fields)  # type: ignore[arg-type]


def reason_of(invoke: object) -> str:
    with pytest.raises(DomainError) as caught:
        invoke()  # type: ignore[operator]
    return caught.value.reason


def test_the_catalog_recognizes_exactly_one_reviewed_historical_tuple() -> None:
    assert len(HISTORICAL_EPOCHS) == 1
    assert CURRENT_EPOCH.tuple != HISTORICAL
    document = catalog_document()
    assert document["catalog_version"] == CATALOG_VERSION
    assert catalog_digest() == digest_of(document)


def test_ordinary_mode_preparation_refuses_the_historical_tuple() -> None:
    assert prepare_mode(CURRENT_EPOCH.tuple) is CURRENT_EPOCH
    assert reason_of(lambda: prepare_mode(HISTORICAL)) == "POLICY_EPOCH_NOT_CURRENT"


@pytest.mark.parametrize("namespace", list(ContinuityNamespace))
def test_recognition_inside_a_continuity_context(namespace: ContinuityNamespace) -> None:
    epoch = recognize(HISTORICAL, context(namespace=namespace))
    assert epoch is HISTORICAL_EPOCHS[HISTORICAL]
    assert recognize(CURRENT_EPOCH.tuple, context(namespace=namespace)) is CURRENT_EPOCH


@pytest.mark.parametrize(
    "where",
    [
        None,
        object(),
        {"namespace": "invalid-read-continuity/preparation"},
        context(profile_qualified=False),
        context(policy_enabled=False),
        context(lease_window_seconds=0),
    ],
    ids=["none", "object", "look-alike", "unqualified", "disabled", "no-window"],
)
def test_outside_the_context_or_its_conditions_the_same_tuple_is_refused(where: object) -> None:
    assert reason_of(lambda: recognize(HISTORICAL, where)) == "POLICY_EPOCH_UNRECOGNIZED"


@pytest.mark.parametrize(
    "changed",
    [
        ModeTuple("original", "required-checkpoint/1", "acknowledge_other"),
        ModeTuple("latest", "required-checkpoint/1", "acknowledge_checkpoint_mode"),
        ModeTuple("original", "required-checkpoint/0", "acknowledge_checkpoint_mode"),
    ],
)
def test_a_tuple_differing_in_any_element_is_not_recognized(changed: ModeTuple) -> None:
    assert reason_of(lambda: recognize(changed, context())) == "POLICY_EPOCH_UNRECOGNIZED"


@pytest.mark.parametrize(
    "adoption",
    [
        "original",
        {"selection": "original", "mode": "required-checkpoint/1"},
        {**HISTORICAL.as_dict(), "extra": "x"},
        {**HISTORICAL.as_dict(), "mode": 1},
        {**HISTORICAL.as_dict(), "selection": ""},
    ],
)
def test_a_malformed_adoption_is_refused_not_guessed(adoption: object) -> None:
    payload = {"checkpoint_mode": adoption}
    assert reason_of(lambda: mode_tuple_of(payload)) == "POLICY_EPOCH_UNRECOGNIZED"
    assert mode_tuple_of({}) is None


def test_the_receipt_binds_both_epochs_to_the_references_profile_and_revision() -> None:
    refs = [NativeReference("run_started", 1, "sha256:" + "a" * 64)]
    receipt = epoch_receipt(HISTORICAL, context(), native_references=refs, checkpoint_digest="d")
    assert receipt["adopted_epoch"]["epoch_id"] == "checkpoint-mode/1"
    assert receipt["current_epoch"]["epoch_id"] == CURRENT_EPOCH.epoch_id
    assert receipt["native_references"] == [r.as_dict() for r in refs]
    assert (receipt["source_profile"], receipt["lease_policy_revision"]) == ("profile-a", 4)
    body = {k: v for k, v in receipt.items() if k != "binding_digest"}
    assert receipt["binding_digest"] == digest_of(body)
    other = epoch_receipt(
        HISTORICAL, context(lease_policy_revision=5), native_references=refs, checkpoint_digest="d"
    )
    assert other["binding_digest"] != receipt["binding_digest"]
