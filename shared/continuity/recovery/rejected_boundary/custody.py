"""The provider request refused before admission (the rejected-boundary recovery; ADR 0009).

The supported case only: the first provider request of the admitted continuation was refused
before the provider admitted it. The native history must show the ownership claim, exactly one
worker claim, exactly one retained provider request under that claim whose checkpoint is the
ticket's derived checkpoint, and the failure under the claim's generation, with nothing else in
between or after (no model response, tool call or outcome, command or stored checkpoint).

The administrator's ``ReviewedRejection`` is validated field by field and must name the retained
request (wire digest and length, and each provider fact the journal retained). It is recorded as
an administrator-reviewed assertion with pinned evidence, never as an authenticated receipt: a
status code or an error message alone proves nothing, so neither is an input here.

The candidate service and the ledger both build the admissibility facts with
``rejected_boundary_facts``, so the two can never judge the same evidence differently.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from shared.continuity.admissibility_facts import ActionFacts, Situation
from shared.continuity.canonical import digest_of, is_digest
from shared.continuity.request_history import RequestHistory, recovery_facts
from shared.runtime.errors import FieldViolation, InvalidArgument

#: The rejected-boundary workflow's stored name.
REJECTED_BOUNDARY = "rejected_boundary"
#: How the review is recorded: never as an authenticated remote receipt.
ASSERTION_KIND = "administrator_reviewed_assertion"

#: Entries allowed between the ownership claim and the failure.
ALLOWED_BEFORE_FAILURE = frozenset(
    {"worker_claimed", "model_request_sent", "startup_recovery_annotation"}
)
#: Provider facts compared with the retained request whenever the journal retained them.
RETAINED_FACTS = ("provider_epoch", "endpoint", "principal", "model", "executable_identity")
#: The roles the original actor must hold now, at the candidate and again at commit.
REQUIRED_ROLES = frozenset({"factory_administrator", "execution_operator"})
#: Counters the provider must not have advanced for a refusal before admission.
ZERO_COUNTERS = ("admissions", "jobs", "provider_dispatches", "tool_callbacks")


@dataclass(frozen=True)
class ReviewedRejection:
    """``ReviewedProviderRejectionV1`` as plain data."""

    provider_epoch: str
    wire_digest: str
    wire_length: int
    endpoint: str
    principal: str
    model: str
    source_revision: str
    executable_identity: str
    source_validator_report_digest: str
    executable_probe_report_digest: str
    admissions: int
    jobs: int
    provider_dispatches: int
    tool_callbacks: int

    @property
    def digest(self) -> str:
        return digest_of({"kind": ASSERTION_KIND, **asdict(self)})

    def validate(self) -> None:
        """Every field present and well formed, every counter zero; INVALID_ARGUMENT
        REVIEWED_REJECTION_INVALID otherwise."""
        violations: list[FieldViolation] = []
        for name in (
            "provider_epoch",
            "endpoint",
            "principal",
            "model",
            "source_revision",
            "executable_identity",
        ):
            if not getattr(self, name).strip():
                violations.append(FieldViolation(f"reviewed_rejection.{name}", "required"))
        for name in (
            "wire_digest",
            "source_validator_report_digest",
            "executable_probe_report_digest",
        ):
            if not is_digest(getattr(self, name)):
                violations.append(
                    FieldViolation(f"reviewed_rejection.{name}", "must be sha256:<64 hex>")
                )
        if self.wire_length <= 0:
            violations.append(FieldViolation("reviewed_rejection.wire_length", "must be positive"))
        for name in ZERO_COUNTERS:
            if getattr(self, name) != 0:
                violations.append(
                    FieldViolation(
                        f"reviewed_rejection.{name}",
                        "must be 0: a refusal before admission created nothing",
                    )
                )
        if violations:
            raise InvalidArgument(
                "REVIEWED_REJECTION_INVALID",
                "; ".join(f"{v.field}: {v.description}" for v in violations),
                field_violations=violations,
            )


def refusal_problems(
    history: RequestHistory,
    review: ReviewedRejection,
    *,
    source_revision: str,
    pending_checkpoint_digest: str,
) -> tuple[str, ...]:
    """Every reason the native history and the review do not prove the supported case."""
    problems: list[str] = []
    if not history.worker_claims:
        problems.append(
            "no worker claimed the request: a never-claimed failure is not a provider refusal"
        )
        return tuple(problems)
    if len(history.worker_claims) != 1:
        problems.append("the request was claimed more than once: only the first request qualifies")
    generation = history.claim_generations[0]
    failures = history.claimed_failures
    if len(failures) != 1 or failures[0][1] != generation:
        problems.append("the history does not retain one failure under the worker's claim")
        return tuple(problems)
    failed_at = failures[0][0]
    problems += [
        f"journal entry {sequence} ({kind}) is not part of a refusal before admission"
        for sequence, kind in history.after_claim
        if (sequence < failed_at and kind not in ALLOWED_BEFORE_FAILURE)
        or (sequence > failed_at and kind != "startup_recovery_annotation")
    ]
    retained = [payload for sequence, payload in history.provider_requests if sequence < failed_at]
    if len(retained) != 1:
        problems.append("the history does not retain exactly one provider request")
        return tuple(problems)
    sent = retained[0]
    checkpoint = history.derived_checkpoint_digest
    if not checkpoint or sent.get("checkpoint_digest") != checkpoint:
        problems.append("the provider request was not built from the ticket's derived checkpoint")
    if pending_checkpoint_digest != checkpoint:
        problems.append("the pending checkpoint is not the ticket's derived checkpoint")
    if sent.get("wire_digest") != review.wire_digest:
        problems.append("the reviewed wire digest is not the retained request's")
    if sent.get("wire_length") != review.wire_length:
        problems.append("the reviewed wire length is not the retained request's")
    if review.source_revision != source_revision:
        problems.append("the reviewed source revision is not the run's")
    problems += [
        f"the reviewed {name} is not the retained request's"
        for name in RETAINED_FACTS
        if name in sent and sent[name] != getattr(review, name)
    ]
    return tuple(problems)


def rejected_boundary_facts(
    history: RequestHistory,
    problems: tuple[str, ...],
    situation: Situation,
) -> ActionFacts:
    """The admissibility facts of the rejected-boundary recovery of ``history``'s request."""
    facts = recovery_facts(
        history,
        REJECTED_BOUNDARY,
        "request_rejected_boundary_recovery",
        situation,
    )
    return replace(
        facts,
        bound=replace(facts.bound, refusal_reviewed=not problems),
        required_authority="factory administrator and execution",
        refusal_problems=problems,
    )
