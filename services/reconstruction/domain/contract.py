"""Tool-contract migration: exactly two permitted changes, every other element equal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from shared.agent import prompts
from shared.agent.evidence import CURRENT_ENVELOPE_SCHEMA
from shared.agent.historical import OLD_ADVERTISED_SCHEMA
from shared.agent.sealed import CapturedContract
from shared.continuity.canonical import canonical_bytes, digest_of
from shared.runtime.errors import FailedPrecondition

EVIDENCE_TOOL: Final = "read_run_evidence"
# (tool, field) → (registered historical value, approved successor, rule name)
PERMITTED: Final[Mapping[tuple[str, str], tuple[Any, Any, str]]] = {
    (EVIDENCE_TOOL, "parameters_json_schema"): (
        dict(OLD_ADVERTISED_SCHEMA),
        dict(CURRENT_ENVELOPE_SCHEMA),
        "current strict worker envelope, page default and maximum 10",
    ),
    (EVIDENCE_TOOL, "description"): (
        prompts.READ_RUN_EVIDENCE["1.0.0"],
        prompts.READ_RUN_EVIDENCE["1.0.1"],
        "registered prompt 1.0.0 to 1.0.1",
    ),
}
# Per-request, SDK-resolved bookkeeping: not part of what a worker declares.
_NOT_CONTRACT: Final = frozenset({"tool_visibility", "revealed_tool_names"})


def _refuse(element: str, message: str) -> FailedPrecondition:
    return FailedPrecondition(
        "CONTRACT_MIGRATION_REFUSED", f"{message} ({element})", metadata={"element": element}
    )


def _same(a: Any, b: Any) -> bool:
    return canonical_bytes(a) == canonical_bytes(b)


def contract_of(
    model_request_parameters: Mapping[str, Any],
    model_settings: Any,
    pending_instructions: Any,
) -> dict[str, Any]:
    """The comparable contract: tools in order, instructions, settings, the rest of the params."""
    params = {
        k: v
        for k, v in model_request_parameters.items()
        if k not in _NOT_CONTRACT | {"function_tools", "instruction_parts"}
    }
    return {
        "tools": list(model_request_parameters["function_tools"]),
        "instructions": {
            "parts": model_request_parameters.get("instruction_parts"),
            "rendered": pending_instructions,
        },
        "model_settings": model_settings,
        "model_request_parameters": params,
    }


def captured_contract_json(captured: CapturedContract) -> dict[str, Any]:
    """The captured current contract, including the wire request actually sent."""
    contract = contract_of(
        captured.model_request_parameters,
        captured.model_settings,
        captured.messages[-1].get("instructions"),
    )
    wire = captured.wire_request
    contract["wire"] = {
        "tools": wire.get("tools"),
        "instructions": [
            m for m in wire.get("messages", []) if m.get("role") in ("system", "developer")
        ],
    }
    return contract


def migrate_contract(historical: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """Compare element by element; return the witness entry or refuse naming the element."""
    old_tools = {t["name"]: t for t in historical["tools"]}
    new_tools = {t["name"]: t for t in current["tools"]}
    if [t["name"] for t in historical["tools"]] != [t["name"] for t in current["tools"]]:
        raise _refuse("tool_order", "tool set or order changed")
    changes: list[dict[str, Any]] = []
    equal: list[str] = []
    for name, old in old_tools.items():
        new = new_tools[name]
        for key in sorted(old.keys() | new.keys()):
            element = f"tools/{name}/{key}"
            rule = PERMITTED.get((name, key))
            if rule is not None:
                registered, successor, label = rule
                if not (_same(old.get(key), registered) and _same(new.get(key), successor)):
                    raise _refuse(element, "not the registered change")
                changes.append(
                    {
                        "element": element,
                        "rule": label,
                        "from_digest": digest_of(registered),
                        "to_digest": digest_of(successor),
                    }
                )
            elif key not in old or key not in new or not _same(old[key], new[key]):
                raise _refuse(element, "changed")
            else:
                equal.append(element)
    for element in ("instructions", "model_settings"):
        if not _same(historical[element], current[element]):
            raise _refuse(element, "changed")
        equal.append(element)
    old_params, new_params = (
        historical["model_request_parameters"],
        current["model_request_parameters"],
    )
    for key in sorted(old_params.keys() | new_params.keys()):
        element = f"model_request_parameters/{key}"
        if (
            key not in old_params
            or key not in new_params
            or not _same(old_params[key], new_params[key])
        ):
            raise _refuse(element, "changed")
        equal.append(element)
    if {c["element"] for c in changes} != {f"tools/{t}/{f}" for t, f in PERMITTED}:
        raise _refuse(f"tools/{EVIDENCE_TOOL}", "the registered changes did not both apply")
    return {"changes": changes, "equal_elements": equal}
