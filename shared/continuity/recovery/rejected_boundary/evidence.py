"""The stored evidence a rejected-boundary recovery pins, judged the same way by the candidate
service and inside the ledger's commit transaction (ADR 0009).

Two kinds of evidence, each a stored document addressed by its SHA-256 digest:

- the review's **source-validator and executable-probe reports**: each must be stored intact and
  name the run's source revision, the executable identity and the provider epoch the review
  records, so a report about another build or provider epoch cannot stand in;
- the **corrective provider configuration**: the provider configuration or version the request is
  sent under next. Evidence for the old rejection does not establish that the current provider
  will accept the request, so the action names the corrective epoch, which must differ from the
  rejected one, and pins a stored configuration document that names both epochs and the model.

Report and configuration formats are in docs/formats.md. ``content_of`` returns a blob's bytes
or None when it is not stored; every function here is pure.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from shared.continuity.canonical import intact_blob, is_digest
from shared.continuity.recovery.rejected_boundary.custody import ReviewedRejection
from shared.runtime.errors import FieldViolation, InvalidArgument

#: The review's report fields and the ``kind`` each stored report declares.
REPORTS = {
    "source_validator_report_digest": "source_validator_report",
    "executable_probe_report_digest": "executable_probe_report",
}
#: What every report names; each must equal the review's field of the same name.
REPORT_FACTS = ("source_revision", "executable_identity", "provider_epoch")
#: The ``kind`` of a stored corrective provider configuration.
CORRECTIVE_KIND = "corrective_provider_configuration"

ContentOf = Callable[[str], bytes | None]


@dataclass(frozen=True)
class EvidenceProblem:
    """One reason a pinned document does not support the action."""

    field: str
    digest: str
    #: True when the document is not stored intact at all (as opposed to stored but unfit).
    missing: bool
    detail: str


@dataclass(frozen=True)
class CorrectiveProvider:
    """``CorrectiveProviderConfigurationV1`` as plain data."""

    provider_epoch: str
    configuration_digest: str

    def validate(self, review: ReviewedRejection) -> None:
        """Well formed and different from the rejected epoch; INVALID_ARGUMENT
        CORRECTIVE_PROVIDER_INVALID otherwise."""
        violations: list[FieldViolation] = []
        epoch = self.provider_epoch
        if not epoch.strip():
            violations.append(FieldViolation("corrective_provider.provider_epoch", "required"))
        elif epoch == review.provider_epoch:
            violations.append(
                FieldViolation(
                    "corrective_provider.provider_epoch",
                    "must differ from the rejected provider epoch: the old configuration was "
                    "refused",
                )
            )
        if not is_digest(self.configuration_digest):
            violations.append(
                FieldViolation(
                    "corrective_provider.configuration_digest", "must be sha256:<64 hex>"
                )
            )
        if violations:
            raise InvalidArgument(
                "CORRECTIVE_PROVIDER_INVALID",
                "; ".join(f"{v.field}: {v.description}" for v in violations),
                field_violations=violations,
            )


def _document(content_of: ContentOf, digest: str) -> dict[str, object] | None:
    """The stored JSON object at ``digest`` when stored intact, else None."""
    content = intact_blob(content_of, digest)
    if content is None:
        return None
    try:
        document = json.loads(content)
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}


def report_problems(
    review: ReviewedRejection, content_of: ContentOf
) -> tuple[EvidenceProblem, ...]:
    """Every reason the review's two reports are not stored intact or do not match it."""
    problems: list[EvidenceProblem] = []
    for field, kind in REPORTS.items():
        digest = getattr(review, field)
        document = _document(content_of, digest)
        name = field.removesuffix("_digest")
        if document is None:
            problems.append(
                EvidenceProblem(field, digest, True, f"the reviewed {name} is not stored intact")
            )
            continue
        if document.get("kind") != kind:
            problems.append(
                EvidenceProblem(field, digest, False, f"the reviewed {name} is not a {kind}")
            )
        problems += [
            EvidenceProblem(
                field, digest, False, f"the reviewed {name} was not made for the review's {fact}"
            )
            for fact in REPORT_FACTS
            if document.get(fact) != getattr(review, fact)
        ]
    return tuple(problems)


def corrective_problems(
    corrective: CorrectiveProvider, review: ReviewedRejection, content_of: ContentOf
) -> tuple[EvidenceProblem, ...]:
    """Every reason the stored corrective configuration does not support ``corrective``."""
    field, digest = "corrective_provider.configuration_digest", corrective.configuration_digest
    document = _document(content_of, digest)
    if document is None:
        return (
            EvidenceProblem(
                field, digest, True, "the corrective provider configuration is not stored intact"
            ),
        )
    expected = {
        "kind": CORRECTIVE_KIND,
        "provider_epoch": corrective.provider_epoch,
        "replaces_provider_epoch": review.provider_epoch,
        "model": review.model,
    }
    return tuple(
        EvidenceProblem(
            field,
            digest,
            False,
            f"the corrective provider configuration's {name} is not {value!r}",
        )
        for name, value in expected.items()
        if document.get(name) != value
    )
