"""The execution-time rules (ADR 0014) as pure checks: revocation, actor loss, a changed source,
configuration or profile, unknown effects and a changed native ticket stop a continuation; nothing
else does. ``transactions/execution_rules.py`` reads their facts and calls them at the claim and
at every later worker write."""

from __future__ import annotations

from collections.abc import Sequence

from services.ledger.domain.execution import OPERATOR_ROLE, WorkerSource
from services.ledger.domain.policy import PolicyRevision
from services.ledger.domain.runs import Run
from shared.continuity.qualification import qualification_problem, qualified_digest
from shared.runtime.errors import FailedPrecondition, PreconditionViolation


def check_policy_for_execution(
    revisions: Sequence[PolicyRevision], ticket_revision: int, switches: Sequence[str] = ()
) -> None:
    """Revocation stops dispatch and execution; any other policy edit does not.

    ``revisions`` are every revision written after the request was queued under
    ``ticket_revision``, up to the current one (just the current one when nothing changed). Each
    must keep the policy enabled and keep every switch the request's workflows needed: a
    revocation anywhere in between stops the request for ever, so re-enabling afterwards revives
    nothing admitted before it. A new window, queue caps or an unrelated switch stop nothing (the
    lease was bounded when it was granted; capacity is no execution allowance)."""
    for policy in revisions:
        revoked = [] if policy.settings.enabled else ["enabled"]
        revoked += [name for name in switches if not getattr(policy.settings, name)]
        if revoked:
            raise FailedPrecondition(
                "POLICY_REVOKED",
                f"policy revision {policy.revision} turned off {', '.join(revoked)}; continuations "
                f"admitted under revision {ticket_revision} stop and are not revived",
                metadata={
                    "policy_revision": str(policy.revision),
                    "ticket_revision": str(ticket_revision),
                    "revoked": ",".join(revoked),
                },
            )


def check_worker_source(
    run: Run, presented: WorkerSource, reason: str = "CLAIM_CHECK_FAILED"
) -> None:
    """The claim (and every later write that presents it) repeats the current checks: the run's
    original attempt, source, configuration and profile, each as the worker presents it."""
    violations = [
        PreconditionViolation(kind, name, f"expected {expected}, got {given}")
        for kind, name, expected, given in (
            ("ATTEMPT", "attempt_id", run.spec.attempt_id, presented.attempt_id),
            ("SOURCE", "source_revision", run.spec.source_revision, presented.source_revision),
            (
                "CONFIGURATION",
                "configuration_digest",
                run.spec.configuration_digest,
                presented.configuration_digest,
            ),
            ("PROFILE", "source_profile", run.spec.source_profile, presented.source_profile),
        )
        if expected != given
    ]
    if violations:
        raise FailedPrecondition(
            reason,
            "the worker's attempt, source, configuration or profile differs from the run's",
            metadata={"mismatched": ",".join(v.subject for v in violations)},
            precondition_violations=violations,
        )
    check_profile_qualified(run)


def check_profile_digest(run: Run, presented: WorkerSource) -> None:
    """A worker that presents the digest of its installed code presents the digest the registry
    qualifies for the run's profile: a worker deployed with other code than its profile names
    is refused at the claim (ADR 0045). Not an epoch refusal: another worker can cure it."""
    if not presented.profile_digest:
        return
    qualified = qualified_digest(run.spec.source_profile)
    if presented.profile_digest != qualified:
        raise FailedPrecondition(
            "PROFILE_DIGEST_MISMATCH",
            f"the worker's installed code digests to {presented.profile_digest}, not "
            f"{qualified}, the digest qualified for {run.spec.source_profile!r}",
            metadata={
                "source_profile": run.spec.source_profile,
                "presented_digest": presented.profile_digest,
                "qualified_digest": qualified or "",
            },
        )


def check_profile_qualified(run: Run) -> None:
    """The run's profile is qualified now (qualification can be withdrawn after a claim)."""
    problem = qualification_problem(run.spec.source_profile)
    if problem is not None:
        raise FailedPrecondition(
            "PROFILE_NOT_QUALIFIED",
            problem,
            metadata={"source_profile": run.spec.source_profile},
        )


def check_no_unknown_effects(unknown_calls: Sequence[str], execution_request_id: str) -> None:
    """A tool call whose durable outcome is unknown stops execution: nothing more is dispatched
    or completed on top of an effect nobody can account for (it needs reconciliation)."""
    if unknown_calls:
        raise FailedPrecondition(
            "UNKNOWN_EFFECT_OUTSTANDING",
            f"tool calls {', '.join(unknown_calls)} have an unknown durable outcome; "
            "execution stops until it is reconciled",
            metadata={
                "execution_request_id": execution_request_id,
                "call_ids": ",".join(unknown_calls),
            },
        )


def check_native_journal_unchanged(
    changed: Sequence[tuple[int, str]], execution_request_id: str
) -> None:
    """Native entries (sequence, kind) appended after the request was queued stop its claim: the
    admission judged the run as it was, and a native resume since then is a changed ticket."""
    if changed:
        sequence, kind = changed[0]
        raise FailedPrecondition(
            "NATIVE_JOURNAL_CHANGED",
            f"the run's native journal changed after execution request {execution_request_id} "
            f"was queued (a native {kind} at sequence {sequence}); a changed native ticket "
            "stops execution: cancel it and judge the run again",
            metadata={
                "execution_request_id": execution_request_id,
                "sequence": str(sequence),
                "kind": kind,
            },
        )


def check_operator_authority(roles: frozenset[str], operator: str, request_id: str) -> None:
    """The ticket's original operator still holds the role the admission required (actor loss
    stops the claim and every command dispatch of the request it admitted)."""
    if OPERATOR_ROLE not in roles:
        raise FailedPrecondition(
            "OPERATOR_AUTHORITY_REVOKED",
            f"{operator}, who admitted request {request_id}, no longer holds {OPERATOR_ROLE}; "
            "actor loss stops execution",
            metadata={"actor": operator, "request_id": request_id, "missing_roles": OPERATOR_ROLE},
        )
