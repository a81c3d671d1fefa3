"""How the CLI prints: protobuf JSON for ``--json``, aligned key/value lines and tables
otherwise, and refusals with their details. Nothing here calls a service."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf import json_format, timestamp_pb2
from google.protobuf.message import Message

from forge.continuity.v1 import admission_pb2, candidate_pb2, common_pb2, inspection_pb2, ledger_pb2
from shared.contract.terms import DIGEST_NAMES, enum_short_name
from shared.runtime.errors import DomainError

SHORT_HASH = len("sha256:") + 12


def to_json_object(message: Message) -> dict[str, Any]:
    """Protobuf → JSON object: proto field names, every field including its default."""
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _time(message: Message, field: str) -> str:
    if not message.HasField(field):
        return "-"
    stamp: timestamp_pb2.Timestamp = getattr(message, field)
    return stamp.ToJsonString()


def short_hash(value: str) -> str:
    return value[:SHORT_HASH] if value else "-"


def aligned(pairs: Sequence[tuple[str, object]], indent: str = "") -> list[str]:
    """``key: value`` lines with the values in one column (continuation lines too)."""
    if not pairs:
        return []
    width = max(len(key) for key, _ in pairs) + 1
    continuation = "\n" + " " * (len(indent) + width + 1)
    return [
        f"{indent}{key + ':':<{width}} " + continuation.join(str(value).splitlines() or [""])
        for key, value in pairs
    ]


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Left-aligned columns (numbers right-aligned), two spaces apart."""
    cells = [list(header), *[[str(cell) for cell in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    numeric = [
        bool(rows) and all(str(row[i]).isdigit() for row in rows) for i in range(len(header))
    ]
    return [
        "  ".join(
            cell.rjust(widths[i]) if numeric[i] else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ).rstrip()
        for row in cells
    ]


# --- policy ------------------------------------------------------------------------------------


def policy_lines(policy: common_pb2.Policy) -> list[str]:
    return aligned(
        [
            ("revision", policy.revision),
            ("enabled", _bool(policy.enabled)),
            ("window_seconds", policy.window_seconds),
            ("per_run_ticket_limit", policy.per_run_ticket_limit),
            ("pending_ticket_limit", policy.pending_ticket_limit),
            (
                "allow_unavailable_source_observations",
                _bool(policy.allow_unavailable_source_observations),
            ),
            ("allow_pre_admission_recovery", _bool(policy.allow_pre_admission_recovery)),
            (
                "allow_readonly_observation_recovery",
                _bool(policy.allow_readonly_observation_recovery),
            ),
            ("updated_by", policy.updated_by),
            ("updated_at", _time(policy, "updated_at")),
            ("digest", policy.digest),
        ]
    )


def policy_history_lines(policies: Sequence[common_pb2.Policy]) -> list[str]:
    def allowed(policy: common_pb2.Policy) -> str:
        names = [
            name
            for name, on in (
                ("unavailable_source_observations", policy.allow_unavailable_source_observations),
                ("pre_admission_recovery", policy.allow_pre_admission_recovery),
                ("readonly_observation_recovery", policy.allow_readonly_observation_recovery),
            )
            if on
        ]
        return ",".join(names) or "-"

    return table(
        (
            "REVISION",
            "ENABLED",
            "WINDOW",
            "PER_RUN",
            "PENDING",
            "ALLOWS",
            "UPDATED_BY",
            "UPDATED_AT",
        ),
        [
            (
                p.revision,
                _bool(p.enabled),
                p.window_seconds,
                p.per_run_ticket_limit,
                p.pending_ticket_limit,
                allowed(p),
                p.updated_by,
                _time(p, "updated_at"),
            )
            for p in policies
        ],
    )


# --- candidate and ticket ----------------------------------------------------------------------


def _digest_pairs(digests: common_pb2.ContinuityDigests) -> list[tuple[str, object]]:
    return [(name, getattr(digests, name) or "-") for name in DIGEST_NAMES]


def hold_lines(holds: Sequence[common_pb2.Hold]) -> list[str]:
    if not holds:
        return ["holds: none"]
    lines = [f"holds: {len(holds)}"]
    for hold in holds:
        reason = enum_short_name(common_pb2.HoldReason, hold.reason)
        requirement = enum_short_name(common_pb2.HoldRequirement, hold.requirement)
        subject = f" [{hold.subject}]" if hold.subject else ""
        lines.append(f"  - {reason}{subject}: requires {requirement}")
        if hold.detail:
            lines.append(f"      {hold.detail}")
    return lines


def handoff_lines(handoff: common_pb2.HandoffPayload) -> list[str]:
    lines = ["handoff:"]
    lines.append("  known effects:" + ("" if handoff.known_effects else " none"))
    lines += [
        f"    #{effect.journal_sequence} {effect.description}" for effect in handoff.known_effects
    ]
    unresolved = handoff.unresolved_alternatives
    lines.append("  unresolved alternatives:" + ("" if unresolved else " none"))
    lines += [f"    {item.subject}: {' | '.join(item.alternatives)}" for item in unresolved]
    obligations = handoff.remaining_obligations
    lines.append("  remaining obligations:" + ("" if obligations else " none"))
    lines += [
        f"    {item.description}" + (f" (blocked by {item.blocked_by})" if item.blocked_by else "")
        for item in obligations
    ]
    actions = handoff.permitted_next_actions
    lines.append("  permitted next actions:" + ("" if actions else " none"))
    lines += [f"    {item.action}: {item.description}" for item in actions]
    consumed = handoff.consumed_resources
    lines.append("  consumed resources:")
    deadline = consumed.deadline_remaining_seconds
    lines += aligned(
        [
            ("model_responses_consumed", consumed.model_responses_consumed),
            ("tool_calls", consumed.tool_calls),
            ("commands", f"{consumed.commands_used} of {consumed.command_limit}"),
            ("deadline_remaining_seconds", "none" if deadline < 0 else deadline),
        ],
        indent="    ",
    )
    return lines


def candidate_lines(candidate: candidate_pb2.InvalidReadContinuityCandidate) -> list[str]:
    proof = candidate.proof
    qualification = candidate.qualification
    pairs: list[tuple[str, object]] = [
        ("run_id", candidate.run_id),
        ("attempt_id", candidate.attempt_id),
        ("eligible", _bool(candidate.eligible)),
        ("version", candidate.version),
        ("policy_revision", candidate.policy_revision),
        ("journal_head", f"{candidate.journal_head.sequence} {candidate.journal_head.hash}"),
        ("source_digest", candidate.source_digest or "-"),
        ("custody_digest", candidate.custody_digest or "-"),
        (
            "qualification",
            f"{qualification.source_profile or '-'} "
            f"({'qualified' if qualification.qualified else 'not qualified'})",
        ),
        *_digest_pairs(candidate.digests),
        ("proof.call_id", proof.call_id or "-"),
        ("proof.query_json", proof.query_json or "-"),
        ("proof.accepted_by_advertised_schema", _bool(proof.accepted_by_advertised_schema)),
        ("proof.rejected_by_pinned_validator", _bool(proof.rejected_by_pinned_validator)),
        ("proof.validator_error", proof.validator_error or "-"),
        ("proof.checkpoint_digest", proof.checkpoint_digest or "-"),
        ("proof.consumed_response_digest", proof.consumed_response_digest or "-"),
        ("proof.consume_sequence", proof.consume_sequence),
        ("proof.runtime_identity", proof.runtime_identity or "-"),
        ("proof.validator_identity", proof.validator_identity or "-"),
        ("proof.derived_checkpoint_digest", proof.derived_checkpoint_digest or "-"),
        ("proof.witness_digest", proof.witness_digest or "-"),
    ]
    return [*aligned(pairs), *hold_lines(candidate.holds), *handoff_lines(candidate.handoff)]


#: How each bound of the lease rule reads in a sentence.
_BOUND_WORDS = {
    "REQUESTED": "the request",
    "POLICY_WINDOW": "the policy window",
    "PROVIDER_TIMEOUT": "the run's provider timeout",
    "ACTIVE_DEADLINE": "the run's remaining deadline",
    "MAXIMUM_WINDOW": "the 7200 s maximum",
}


def lease_bounds_text(bounds: common_pb2.LeaseBounds) -> str:
    """Why the lease is as long as it is: the bound that won, then every bound applied
    ("900 s, bounded by the run's provider timeout (requested 1800 s, ...)")."""
    winner = enum_short_name(common_pb2.LeaseBound, bounds.limited_by)
    deadline = bounds.deadline_remaining_seconds
    why = (
        "as requested"
        if winner == "REQUESTED"
        else f"bounded by {_BOUND_WORDS.get(winner, winner)}"
    )
    return (
        f"{bounds.granted_seconds} s, {why} (requested {bounds.requested_seconds} s, policy "
        f"window {bounds.policy_window_seconds} s, provider timeout "
        f"{bounds.provider_timeout_seconds} s, deadline "
        + ("none" if deadline < 0 else f"{deadline} s left")
        + f", maximum {bounds.maximum_seconds} s)"
    )


def ticket_lines(ticket: ledger_pb2.AdmissionTicket, created: bool | None = None) -> list[str]:
    execution = ticket.execution_request
    lease = execution.lease
    pairs: list[tuple[str, object]] = []
    if created is not None:
        pairs.append(
            ("created", "true" if created else "false (identical repeat: the stored ticket)")
        )
    pairs += [
        ("run_id", ticket.run_id),
        ("request_id", ticket.request_id),
        ("operator_identity", ticket.operator_identity),
        ("version", ticket.version),
        ("policy_revision", ticket.policy_revision),
        ("settlement_sequence", ticket.settlement_sequence),
        ("claim_sequence", ticket.claim_sequence),
        ("derived_checkpoint_digest", ticket.derived_checkpoint_digest),
        ("request_content_digest", ticket.request_content_digest),
        ("created_at", _time(ticket, "created_at")),
        *_digest_pairs(ticket.digests),
        ("execution_request_id", execution.execution_request_id),
        ("execution_state", enum_short_name(common_pb2.ExecutionRequestState, execution.state)),
        ("attempt_id", execution.attempt_id),
        ("checkpoint_digest", execution.checkpoint_digest),
        ("lease_seconds", lease.seconds),
        *(
            [("lease_bounds", lease_bounds_text(ticket.lease_bounds))]
            if ticket.HasField("lease_bounds")
            else []
        ),
        ("lease_generation", lease.generation),
        ("lease_expires_at", _time(lease, "expires_at")),
        ("owner", execution.owner or "-"),
    ]
    current = ticket.current_execution_request
    if current.execution_request_id:
        # The chain's current member: the original, or a reconciliation's retry.
        pairs += [
            ("current_execution_request_id", current.execution_request_id),
            ("current_state", execution_state(current)),
        ]
    return aligned(pairs)


def execution_state(request: common_pb2.ExecutionRequest) -> str:
    """The state's short name, lower case (queued, claimed, ..., cancelled, expired)."""
    return enum_short_name(common_pb2.ExecutionRequestState, request.state).lower()


def execution_request_lines(requests: Sequence[common_pb2.ExecutionRequest]) -> list[str]:
    if not requests:
        return ["no execution requests"]
    return table(
        ("EXECUTION REQUEST", "REQUEST", "STATE", "GEN", "OWNER", "SCHEDULING"),
        [
            (
                r.execution_request_id,
                r.request_id,
                execution_state(r),
                r.lease.generation,
                r.owner or "-",
                f"refused: {r.admission_refusal}" if r.admission_refusal else "eligible",
            )
            for r in requests
        ],
    )


# --- journal -----------------------------------------------------------------------------------


def journal_lines(entries: Sequence[common_pb2.JournalEntry]) -> list[str]:
    if not entries:
        return ["no journal entries"]
    return table(
        ("SEQ", "KIND", "ACTOR", "HASH"),
        [
            (
                entry.sequence,
                enum_short_name(common_pb2.JournalEntryKind, entry.kind),
                entry.actor,
                short_hash(entry.hash),
            )
            for entry in entries
        ],
    )


def verification_lines(result: ledger_pb2.VerifyJournalResponse) -> list[str]:
    pairs: list[tuple[str, object]] = [
        ("valid", _bool(result.valid)),
        ("entries_checked", result.entries_checked),
        ("head_sequence", result.head.sequence),
        ("head_hash", result.head.hash),
    ]
    if not result.valid:
        pairs += [
            ("first_broken_sequence", result.first_broken_sequence),
            ("problem", result.problem or "-"),
        ]
    return aligned(pairs)


def inspection_lines(result: inspection_pb2.InspectJournalResponse) -> list[str]:
    """One line per record (kind, status, epoch, findings) and per credential finding; the
    redacted record text only in --json."""
    lines = aligned(
        [
            ("run_id", result.run_id),
            ("head_sequence", result.head.sequence),
            ("credential_findings", result.credential_finding_count),
            ("screening_rules", result.screening_rules),
        ]
    )
    for record in result.records:
        kind = enum_short_name(inspection_pb2.InspectedRecordKind, record.kind).lower()
        status = enum_short_name(inspection_pb2.InspectedRecordStatus, record.status).lower()
        lines.append(
            f"record {record.referenced_by_sequence} {kind} {status} "
            f"{record.sdk_epoch or '-'} {record.digest}"
            + (f" problem={record.problem}" if record.problem else "")
            + (f" validator={record.validator.standing}" if record.validator.standing else "")
        )
        lines += [f"  credential {f.kind} at {f.location}" for f in record.credential_findings]
    for entry in result.entries:
        lines += [
            f"entry {entry.sequence} credential {f.kind} at {f.location}"
            for f in entry.credential_findings
        ]
    return lines


# --- refusals ----------------------------------------------------------------------------------


def _roles(numbers: Sequence[int]) -> str:
    return ", ".join(enum_short_name(common_pb2.Role, n).lower() for n in numbers) or "-"


def permission_lines(reply: admission_pb2.GetCallerPermissionsResponse) -> list[str]:
    """The caller, then one row per RPC: whether it is permitted and which roles permit it."""
    rows = [
        (p.method.rsplit(".", 1)[-1], "yes" if p.permitted else "no", _roles(p.required_roles))
        for p in reply.permissions
    ]
    return [
        *aligned([("identity", reply.identity), ("roles", _roles(reply.roles))]),
        "",
        *table(("METHOD", "PERMITTED", "ROLES"), rows),
    ]


def _named(text: str, names: Mapping[str, str]) -> str:
    """``text`` with each contract field the command took named as the operator typed it."""
    # Only snake_case field names: a plain word ("version", "decision") stays a word.
    fields = sorted((field for field in names if "_" in field), key=len, reverse=True)
    if not fields:
        return text
    pattern = r"\b(" + "|".join(re.escape(field) for field in fields) + r")\b"
    return re.sub(pattern, lambda found: names[found.group(1)], text)


def error_lines(error: DomainError, names: Mapping[str, str] | None = None) -> list[str]:
    """``error: CODE REASON: message`` (the code once when a bare status has no other reason)
    and the details; ``names`` maps contract fields to the command's flags, which the refusal
    then names instead of proto fields."""
    names = names or {}
    head = (
        error.kind.name if error.reason == error.kind.name else f"{error.kind.name} {error.reason}"
    )
    lines = [f"error: {head}: {_named(error.message, names)}"]
    if error.field_violations:
        lines.append("  field violations:")
        lines += [
            f"    {names.get(v.field, v.field)}: {_named(v.description, names)}"
            for v in error.field_violations
        ]
    if error.precondition_violations:
        lines.append("  precondition violations:")
        lines += [
            f"    {v.type} {v.subject}: {v.description}" for v in error.precondition_violations
        ]
    if error.metadata:
        lines.append("  metadata:")
        lines += aligned(sorted(error.metadata.items()), indent="    ")
    handoff = error.detail(common_pb2.HandoffPayload)
    if handoff is not None:
        # a refusal of the admissibility check says what is bound, known and permitted next
        lines += ["  " + line for line in handoff_lines(handoff)]
    return lines


def error_object(error: DomainError, names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The refusal for machines: the contract's field names, and beside each field violation
    the ``flag`` the command took it as (when it took it), and the handoff a refusal of the
    admissibility check carries (proto3 JSON, as in a candidate)."""
    names = names or {}
    handoff = error.detail(common_pb2.HandoffPayload)
    return {
        "error": {
            "code": error.kind.name,
            "reason": error.reason,
            "message": error.message,
            "metadata": dict(error.metadata),
            "field_violations": [
                {"field": v.field, "description": v.description}
                | ({"flag": names[v.field]} if v.field in names else {})
                for v in error.field_violations
            ],
            "precondition_violations": [
                {"type": v.type, "subject": v.subject, "description": v.description}
                for v in error.precondition_violations
            ],
        }
        | ({"handoff": to_json_object(handoff)} if handoff is not None else {})
    }
