"""The policy-epoch receipt of a migration settlement, from the native rows the admission
transaction read (pure; the catalog is ``shared.continuity.policy_epochs``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.ledger.domain.journal import StoredEntry, payload_of
from services.ledger.domain.policy import PolicyRevision
from services.ledger.domain.runs import Run
from shared.continuity.canonical import parse_json
from shared.continuity.policy_epochs import (
    ContinuityEpochContext,
    ContinuityNamespace,
    NativeReference,
    epoch_receipt,
    mode_tuple_of,
    recognize,
)
from shared.continuity.qualification import is_qualified


def continuity_context(
    namespace: ContinuityNamespace, run: Run, policy: PolicyRevision
) -> ContinuityEpochContext:
    """The namespaced context with the current profile qualification and lease policy."""
    return ContinuityEpochContext(
        namespace=namespace,
        source_profile=run.spec.source_profile,
        profile_qualified=is_qualified(run.spec.source_profile),
        policy_enabled=policy.settings.enabled,
        lease_window_seconds=policy.settings.window_seconds,
        lease_policy_revision=policy.revision,
    )


def admission_epoch_receipt(
    run: Run,
    policy: PolicyRevision,
    *,
    run_started: StoredEntry | None,
    checkpoint_stored: StoredEntry | None,
    response_consumed: StoredEntry | None,
) -> dict[str, Any]:
    """Recognize the run's adopted epoch in the continuity preparation context and bind both
    epochs to the old ``run_started``, ``checkpoint_stored`` and ``response_consumed`` rows.
    POLICY_EPOCH_UNRECOGNIZED when the adoption is malformed or not recognized."""
    started = parse_json(run_started.payload_json) if run_started is not None else {}
    adopted = mode_tuple_of(started if isinstance(started, dict) else {})
    checkpoint = parse_json(checkpoint_stored.payload_json) if checkpoint_stored else {}
    references = [
        NativeReference(entry.kind, entry.sequence, entry.hash)
        for entry in (run_started, checkpoint_stored, response_consumed)
        if entry is not None
    ]
    return epoch_receipt(
        adopted,
        continuity_context(ContinuityNamespace.PREPARATION, run, policy),
        native_references=references,
        checkpoint_digest=str(checkpoint.get("checkpoint_digest", ""))
        if isinstance(checkpoint, dict)
        else "",
    )


def recognize_for_execution(
    run: Run,
    policy: PolicyRevision,
    run_started: StoredEntry | None,
    parse: Callable[[StoredEntry], Any] = payload_of,
) -> None:
    """A worker claim recognizes the run's adopted epoch again, in the continuity execution
    context, under the catalog installed now: POLICY_EPOCH_UNRECOGNIZED otherwise. ``parse``:
    an entry's payload (the claim's, which keeps the entries it read parsed)."""
    started = parse(run_started) if run_started is not None else {}
    adopted = mode_tuple_of(started if isinstance(started, dict) else {})
    if adopted is not None:
        recognize(adopted, continuity_context(ContinuityNamespace.EXECUTION, run, policy))
