"""The demo's consumed continuation turn whose evidence observation was not retained.

After the provider-refusal recovery the worker claims the request again and sends the same
pending request (the SDK builds the same bytes from the same derived checkpoint). The provider
answers with one response carrying a ``read_run_evidence`` call and a ``list_files`` call; the
worker consumes it, grants both calls as reads, retains the ``list_files`` result, cannot retain
the evidence result (its durable outcome is ``unknown``) and fails under its claim.

``consumed_turn`` returns the raw response bytes and the native journal payloads a worker
retains for that turn, in order, so the demo and the tests record the same custody.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from shared.canonical import canonical_bytes, digest_of, sha256_digest

EVIDENCE_CALL: Final = "call_ev_2"
LIST_CALL: Final = "call_ls_2"
#: The exact result the list_files call returned and the worker retained.
LISTED: Final = ["src/evidence.py", "src/reader.py"]


@dataclass(frozen=True)
class ConsumedTurn:
    """The consumed response and the journal custody of its calls."""

    raw_response: bytes
    retained_result: bytes
    #: (kind, payload) after the retained model_request_sent, before the failure.
    entries: tuple[tuple[str, dict[str, object]], ...]


def consumed_turn(
    request_id: str, evidence_run_id: str, model: str, consumed_at: str, *, listing: bool = True
) -> ConsumedTurn:
    """The turn of provider request ``request_id``; ``listing`` adds the list_files call."""
    calls: list[tuple[str, str, dict[str, object]]] = [
        (EVIDENCE_CALL, "read_run_evidence", {"query": {"run_id": evidence_run_id, "kind": "log"}})
    ]
    if listing:
        calls.append((LIST_CALL, "list_files", {"path": "src"}))
    body = {
        "id": "chatcmpl-continuation-1",
        "object": "chat.completion",
        "created": 1796280000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                        for call_id, name, args in calls
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 1380, "completion_tokens": 58, "total_tokens": 1438},
    }
    raw = json.dumps(body, separators=(",", ":")).encode()
    retained = canonical_bytes(LISTED)
    entries: list[tuple[str, dict[str, object]]] = [
        (
            "response_consumed",
            {
                "request_id": request_id,
                "response_digest": sha256_digest(raw),
                "consumed_at": consumed_at,
            },
        )
    ]
    entries += [
        (
            "tool_call_granted",
            {"call_id": c, "tool_name": n, "args_digest": digest_of(a), "grant": "read"},
        )
        for c, n, a in calls
    ]
    entries += [("tool_intent", {"call_id": c}) for c, _, _ in calls]
    if listing:
        entries.append(
            (
                "tool_outcome",
                {
                    "call_id": LIST_CALL,
                    "status": "succeeded",
                    "result_digest": sha256_digest(retained),
                },
            )
        )
    # The evidence read could not durably retain its result: the agentic_tool_unknown record.
    entries.append(
        (
            "tool_outcome",
            {"call_id": EVIDENCE_CALL, "status": "unknown", "reason": "agentic_tool_unknown"},
        )
    )
    return ConsumedTurn(raw, retained, tuple(entries))
