"""The review document (forge.continuity.review/1): the one writer and the one reader the CLI
uses and the console's documents are held to (tests/console/test_rejected_boundary.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format

from forge.continuity.v1 import common_pb2
from shared.contract import review_document
from shared.contract.review_document import FORMAT, ReviewDocument, ReviewDocumentError

REVIEWED = common_pb2.ReviewedProviderRejectionV1(
    provider_epoch="epoch-7", wire_digest="sha256:" + "a" * 64, wire_length=10,
    endpoint="http://127.0.0.1:1/v1/chat/completions", principal="p", model="m",
    source_revision="r", executable_identity="e",
    source_validator_report_digest="sha256:" + "b" * 64,
    executable_probe_report_digest="sha256:" + "c" * 64,
)  # fmt: skip
CORRECTIVE = common_pb2.CorrectiveProviderConfigurationV1(
    provider_epoch="epoch-8", configuration_digest="sha256:" + "d" * 64
)
DOCUMENT = ReviewDocument(
    workflow="rejected_boundary",
    run_id="run-1",
    request_id="req-1",
    inputs={"reviewed_rejection": REVIEWED, "corrective_provider": CORRECTIVE},
    candidate_digest="sha256:" + "e" * 64,
    acknowledgements=frozenset({"acknowledge_same_request_and_budgets"}),
)


def as_json(message: common_pb2.ReviewedProviderRejectionV1) -> dict[str, object]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def test_what_is_written_reads_back_unchanged() -> None:
    text = review_document.write(DOCUMENT)
    assert review_document.read(text) == DOCUMENT
    held = json.loads(text)
    assert held["format"] == FORMAT == "forge.continuity.review/1"
    assert held["inputs"]["reviewed_rejection"]["provider_epoch"] == "epoch-7"
    assert held["acknowledgements"] == {"acknowledge_same_request_and_budgets": True}


def test_a_document_before_its_review_carries_inputs_only() -> None:
    bare = ReviewDocument("rejected_boundary", "run-1", "req-1", {"reviewed_rejection": REVIEWED})
    held = json.loads(review_document.write(bare))
    assert set(held) == {"format", "workflow", "run_id", "request_id", "inputs"}
    assert review_document.read(json.dumps(held)) == bare


@pytest.mark.parametrize(
    ("held", "message"),
    [
        # The CLI's file before version 1: the bare reviewed rejection.
        (as_json(REVIEWED), "an unversioned review document: this release reads " + FORMAT),
        # The console's document before version 1: the inputs at the top level.
        (
            {"reviewed_rejection": as_json(REVIEWED), "corrective_provider": as_json(CORRECTIVE)},
            "an unversioned review document",
        ),
        ({"format": "forge.continuity.review/2"}, "format 'forge.continuity.review/2'"),
        ([], "a review document is a JSON object"),
    ],
)
def test_an_older_or_other_shape_is_refused_by_its_version(held: object, message: str) -> None:
    with pytest.raises(ReviewDocumentError, match=message):
        review_document.read(json.dumps(held))


def altered(**changes: object) -> str:
    held = json.loads(review_document.write(DOCUMENT))
    held.update(changes)
    return json.dumps(held)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        (altered(workflow="never_claimed"), "inputs: never_claimed takes no input, not"),
        (altered(workflow="nonesuch"), "unknown workflow 'nonesuch'"),
        (altered(run_id=""), "run_id must be a non-empty string"),
        (altered(reviewer="ada"), "unknown field reviewer"),
        (
            altered(inputs={"reviewed_rejection": {"provider_epoch": 7}}),
            "inputs.reviewed_rejection",
        ),
        (altered(inputs={"derived": {}}), "takes reviewed_rejection, corrective_provider, not"),
        (altered(acknowledgements={"acknowledge_same_request_and_budgets": "yes"}), "must be true"),
        (altered(acknowledgements={"acknowledge_everything": True}), "no acknowledgement"),
        (altered(candidate_digest=1), "candidate_digest must be a string"),
    ],
)
def test_every_field_is_checked(text: str, message: str) -> None:
    with pytest.raises(ReviewDocumentError, match=message):
        review_document.read(text)


def test_a_review_of_another_request_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "review.json"
    path.write_text(review_document.write(DOCUMENT), encoding="utf-8")
    assert review_document.load(str(path), "rejected_boundary", "run-1", "req-1") == DOCUMENT
    with pytest.raises(
        ReviewDocumentError, match="not rejected_boundary of run run-1 request req-2"
    ):
        review_document.load(str(path), "rejected_boundary", "run-1", "req-2")
    with pytest.raises(ReviewDocumentError, match="cannot read it"):
        review_document.load(str(tmp_path / "absent.json"), "rejected_boundary", "run-1", "req-1")
