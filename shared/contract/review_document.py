"""The administrator's review document, ``forge.continuity.review/1``: the one file shape that the
CLI (``refusal candidate | submit --review FILE``) and the operator console read and write for a
recovery workflow that takes typed inputs (docs/formats.md).

    {"format": "forge.continuity.review/1",
     "workflow": "rejected_boundary", "run_id": "run-1", "request_id": "req-1",
     "inputs": {"reviewed_rejection": {...}, "corrective_provider": {...}},
     "candidate_digest": "sha256:...",
     "acknowledgements": {"acknowledge_reviewed_provider_epoch": true, ...}}

``inputs`` holds each input under the submission's field name, as the contract's JSON (field names
as in the .proto), exactly the fields the admission request carries; ``candidate_digest`` and
``acknowledgements`` are what an operator reviewed and accepted, absent until then. An
acknowledgement is the Boolean ``true`` or absent. The document names its run, request and
workflow, so a review of one request is never read as a review of another.

A document without ``format`` (the unversioned shapes read before version 1: the bare
``ReviewedProviderRejectionV1`` the CLI took, or the console's ``{"reviewed_rejection": ...}``) is
refused with a message naming the version and the change; another version is refused by name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from shared.continuity.recovery import WORKFLOWS, Workflow
from shared.contract.recovery_proto import WIRE_INPUTS

FORMAT = "forge.continuity.review/1"

_KEYS = frozenset(
    {"format", "workflow", "run_id", "request_id", "inputs", "candidate_digest", "acknowledgements"}
)
_REQUIRED = ("format", "workflow", "run_id", "request_id", "inputs")


class ReviewDocumentError(ValueError):
    """The file is not a review document this reader accepts; the message says why."""


@dataclass(frozen=True)
class ReviewDocument:
    """One review of one request's recovery by one workflow."""

    workflow: str
    run_id: str
    request_id: str
    #: Each input present, by the submission's field name, as the contract's message.
    inputs: Mapping[str, Message]
    #: The candidate digest the operator reviewed ("" before the review).
    candidate_digest: str = ""
    #: The acknowledgements the operator accepted (each one true).
    acknowledgements: frozenset[str] = field(default_factory=frozenset)


def input_fields(workflow: Workflow) -> dict[str, type[Message]]:
    """The workflow's input fields and their message classes, in contract order."""
    return {wire.field: wire.message for wire in WIRE_INPUTS if wire.attribute in workflow.inputs}


def load(path: str, workflow: str, run_id: str, request_id: str) -> ReviewDocument:
    """The review document at ``path``, which must be ``workflow``'s review of that request."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ReviewDocumentError(f"cannot read it: {error.strerror or error}") from error
    document = read(text)
    named = (document.workflow, document.run_id, document.request_id)
    if named != (workflow, run_id, request_id):
        raise ReviewDocumentError(
            f"it reviews {document.workflow} of run {document.run_id} request "
            f"{document.request_id}, not {workflow} of run {run_id} request {request_id}"
        )
    return document


def write(document: ReviewDocument) -> str:
    """The document as the one JSON text (sorted keys, two-space indent, a final newline)."""
    workflow = WORKFLOWS[document.workflow]
    fields = input_fields(workflow)
    unknown = sorted(set(document.inputs) - set(fields))
    if unknown:
        raise ReviewDocumentError(f"{workflow.name} takes no input {', '.join(unknown)}")
    body: dict[str, Any] = {
        "format": FORMAT,
        "workflow": workflow.name,
        "run_id": document.run_id,
        "request_id": document.request_id,
        "inputs": {
            name: json_format.MessageToDict(message, preserving_proto_field_name=True)
            for name, message in document.inputs.items()
        },
    }
    if document.candidate_digest:
        body["candidate_digest"] = document.candidate_digest
    if document.acknowledgements:
        body["acknowledgements"] = {
            name: True for name in workflow.acknowledgements if name in document.acknowledgements
        }
    return json.dumps(body, indent=2, sort_keys=True) + "\n"


def read(text: str) -> ReviewDocument:
    """The document in ``text``, every field checked; :class:`ReviewDocumentError` otherwise."""
    try:
        held = json.loads(text)
    except ValueError as error:
        raise ReviewDocumentError(f"not JSON ({error})") from error
    if not isinstance(held, dict):
        raise ReviewDocumentError(f"a review document is a JSON object ({FORMAT})")
    version = held.get("format")
    if version is None:
        raise ReviewDocumentError(
            f"an unversioned review document: this release reads {FORMAT} only. Put the "
            'reviewed messages under "inputs" by field name and add "format", "workflow", '
            '"run_id" and "request_id" (docs/formats.md)'
        )
    if version != FORMAT:
        raise ReviewDocumentError(
            f"review document format {version!r}: this release reads {FORMAT}"
        )
    missing = [name for name in _REQUIRED if name not in held]
    unknown = sorted(set(held) - _KEYS)
    if missing or unknown:
        raise ReviewDocumentError(
            "; ".join(
                [f"missing {', '.join(missing)}"] * bool(missing)
                + [f"unknown field {', '.join(unknown)}"] * bool(unknown)
            )
        )
    for name in ("workflow", "run_id", "request_id"):
        if not isinstance(held[name], str) or not held[name]:
            raise ReviewDocumentError(f"{name} must be a non-empty string")
    workflow = WORKFLOWS.get(held["workflow"])
    if workflow is None:
        raise ReviewDocumentError(
            f"unknown workflow {held['workflow']!r} (one of {', '.join(sorted(WORKFLOWS))})"
        )
    return ReviewDocument(
        workflow=workflow.name,
        run_id=held["run_id"],
        request_id=held["request_id"],
        inputs=_inputs(workflow, held["inputs"]),
        candidate_digest=_candidate_digest(held.get("candidate_digest", "")),
        acknowledgements=_acknowledgements(workflow, held.get("acknowledgements", {})),
    )


def _inputs(workflow: Workflow, held: object) -> dict[str, Message]:
    fields = input_fields(workflow)
    if not isinstance(held, dict):
        raise ReviewDocumentError("inputs must be an object")
    unknown = sorted(set(held) - set(fields))
    if unknown:
        raise ReviewDocumentError(
            f"inputs: {workflow.name} takes {', '.join(fields) or 'no input'}, "
            f"not {', '.join(unknown)}"
        )
    found: dict[str, Message] = {}
    for name, value in held.items():
        try:
            found[name] = json_format.ParseDict(value, fields[name]())
        except json_format.ParseError as error:
            raise ReviewDocumentError(f"inputs.{name}: {error}") from error
    return found


def _candidate_digest(held: object) -> str:
    if not isinstance(held, str):
        raise ReviewDocumentError("candidate_digest must be a string")
    return held


def _acknowledgements(workflow: Workflow, held: object) -> frozenset[str]:
    if not isinstance(held, dict):
        raise ReviewDocumentError("acknowledgements must be an object")
    for name, value in held.items():
        if name not in workflow.acknowledgements:
            raise ReviewDocumentError(
                f"acknowledgements: {workflow.name} has no acknowledgement {name!r}"
            )
        if value is not True:
            raise ReviewDocumentError(f"acknowledgements.{name} must be true, or absent")
    return frozenset(held)
