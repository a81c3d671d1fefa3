"""Policy, execution request and journal entry ↔ protobuf conversions the ledger servicers share
(translation only)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict

from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

from forge.continuity.v1 import common_pb2
from services.ledger.domain.execution import ExecutionRequestRecord, LeaseBounds, RequestState
from services.ledger.domain.journal import EntryKind, StoredEntry
from services.ledger.domain.policy import PolicyRevision
from shared.continuity.timeutil import set_timestamp, to_timestamp
from shared.contract.terms import enum_number, enum_short_name
from shared.runtime.errors import field_invalid


def policy_to_proto(policy: PolicyRevision) -> common_pb2.Policy:
    settings = policy.settings
    return common_pb2.Policy(
        revision=policy.revision,
        **asdict(settings),
        updated_by=policy.updated_by,
        updated_at=to_timestamp(policy.updated_at),
        digest=policy.digest,
    )


def state_from_proto(value: int) -> RequestState:
    try:
        return RequestState(enum_short_name(common_pb2.ExecutionRequestState, value).lower())
    except ValueError:
        raise field_invalid(
            "states",
            "must be known ExecutionRequestState values",
            f"unknown execution request state {value}",
        ) from None


def state_to_proto(state: RequestState) -> common_pb2.ExecutionRequestState.ValueType:
    return common_pb2.ExecutionRequestState.ValueType(
        enum_number(common_pb2.ExecutionRequestState, state.value)
    )


def execution_request_to_proto(record: ExecutionRequestRecord) -> common_pb2.ExecutionRequest:
    return common_pb2.ExecutionRequest(
        execution_request_id=record.execution_request_id,
        run_id=record.run_id,
        attempt_id=record.attempt_id,
        request_id=record.request_id,
        checkpoint_digest=record.checkpoint_digest,
        state=state_to_proto(record.state),
        lease=common_pb2.Lease(
            generation=record.lease_generation,
            seconds=record.lease_seconds,
            expires_at=to_timestamp(record.lease_expires_at),
        ),
        owner=record.owner,
        admission_refusal=record.admission_refusal,
        created_at=to_timestamp(record.created_at),
        updated_at=to_timestamp(record.updated_at),
    )


def lease_bounds_to_proto(bounds: LeaseBounds | None) -> common_pb2.LeaseBounds | None:
    """The stored bounds of a grant; None (the field stays absent) for a record saved before
    the bounds were kept, or a decision that granted no lease."""
    if bounds is None:
        return None
    return common_pb2.LeaseBounds(
        requested_seconds=bounds.requested_seconds,
        policy_window_seconds=bounds.policy_window_seconds,
        provider_timeout_seconds=bounds.provider_timeout_seconds,
        deadline_remaining_seconds=bounds.deadline_remaining_seconds,
        maximum_seconds=bounds.maximum_seconds,
        granted_seconds=bounds.granted_seconds,
        limited_by=common_pb2.LeaseBound.ValueType(
            enum_number(common_pb2.LeaseBound, bounds.limited_by.value)
        ),
    )


# Looked up once per entry sent (a snapshot of a long journal sends every one).
_KIND_NUMBERS = {
    kind.value: common_pb2.JournalEntryKind.ValueType(
        enum_number(common_pb2.JournalEntryKind, kind.value)
    )
    for kind in EntryKind
}


def kind_to_proto(kind: str) -> common_pb2.JournalEntryKind.ValueType:
    number = _KIND_NUMBERS.get(kind)
    return number if number is not None else _KIND_NUMBERS[EntryKind(kind).value]


def entry_to_proto(entry: StoredEntry) -> common_pb2.JournalEntry:
    message = common_pb2.JournalEntry()
    _write_entry(message, entry)
    return message


def add_entries(
    into: RepeatedCompositeFieldContainer[common_pb2.JournalEntry], entries: Iterable[StoredEntry]
) -> None:
    """Each entry as a new element of a message's repeated field: a list handed to the parent's
    constructor is copied element by element, which cost half as much again as the conversion
    (a snapshot converts every entry of the journal)."""
    add = into.add
    for entry in entries:
        _write_entry(add(), entry)


def _write_entry(message: common_pb2.JournalEntry, entry: StoredEntry) -> None:
    message.run_id = entry.run_id
    message.sequence = entry.sequence
    message.kind = kind_to_proto(entry.kind)
    message.payload_json = entry.payload_json
    message.prev_hash = entry.prev_hash
    message.hash = entry.hash
    message.actor = entry.actor
    if entry.recorded_at:
        set_timestamp(message.recorded_at, entry.recorded_at)
