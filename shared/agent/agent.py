"""The installed reference worker: its agent, tools and the ``execute_agentic`` entry point."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Protocol

from pydantic import ValidationError
from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import RunUsage, UsageLimits

from shared.agent import prompts
from shared.agent.evidence import CURRENT_ENVELOPE_SCHEMA, INVALID_QUERY_RESULT, EvidenceEnvelope

AGENTIC_VERSION: Final = "26.10.1"
MODEL_SETTINGS: Final[ModelSettings] = {"temperature": 0.2, "max_tokens": 2048}
# Grants are tool metadata: never sent to the model, part of the contract the migration compares.
GRANTS: Final[Mapping[str, str]] = {
    "read_run_evidence": "read",
    "list_files": "read",
    "read_file": "read",
    "run_command": "command",
}


class WorkerEffects(Protocol):
    """What the tools do. The live worker reads the source tree and evidence store; a sealed
    reconstruction passes effects that refuse, so no original callback can run."""

    def read_evidence(self, query: Mapping[str, Any]) -> dict[str, Any]: ...

    def list_files(self, path: str) -> list[str]: ...

    def read_file(self, path: str) -> str: ...

    def run_command(self, argv: Sequence[str]) -> dict[str, Any]: ...


@dataclass(frozen=True)
class AgenticTask:
    """One task for the worker."""

    run_id: str
    conversation_id: str
    prompt: str | None
    message_history: Sequence[ModelMessage] = ()
    usage: RunUsage | None = None
    usage_limits: UsageLimits | None = None


@dataclass
class LocalEffects:
    """Effects against a local source tree and an in-memory evidence store."""

    root: Path
    evidence: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    granted_commands: frozenset[tuple[str, ...]] = frozenset()

    def read_evidence(self, query: Mapping[str, Any]) -> dict[str, Any]:
        items = list(self.evidence.get(f"{query['run_id']}/{query['kind']}", ()))
        page = int(query.get("page", 10))
        return {"status": "ok", "items": items[(page - 1) * 20 : page * 20]}

    def list_files(self, path: str) -> list[str]:
        base = (self.root / path).resolve()
        return sorted(str(p.relative_to(self.root)) for p in base.rglob("*") if p.is_file())

    def read_file(self, path: str) -> str:
        return (self.root / path).read_text(encoding="utf-8")

    def run_command(self, argv: Sequence[str]) -> dict[str, Any]:
        raise PermissionError(f"command not granted: {list(argv)!r}")


async def _advertise_envelope(
    ctx: RunContext[WorkerEffects], tool: ToolDefinition
) -> ToolDefinition:
    # The function takes a raw object so an unacceptable query becomes a checkpoint-safe result
    # instead of a retry; the model still sees (and providers enforce) the strict envelope.
    return replace(tool, parameters_json_schema=copy.deepcopy(dict(CURRENT_ENVELOPE_SCHEMA)))


def read_run_evidence(ctx: RunContext[WorkerEffects], query: dict[str, Any]) -> dict[str, Any]:
    try:
        envelope = EvidenceEnvelope.model_validate_json(json.dumps({"query": query}))
    except ValidationError:
        return dict(INVALID_QUERY_RESULT)
    return ctx.deps.read_evidence(envelope.query.model_dump())


def list_files(ctx: RunContext[WorkerEffects], path: str) -> list[str]:
    return ctx.deps.list_files(path)


def read_file(ctx: RunContext[WorkerEffects], path: str) -> str:
    return ctx.deps.read_file(path)


def run_command(ctx: RunContext[WorkerEffects], argv: list[str]) -> dict[str, Any]:
    return ctx.deps.run_command(argv)


def build_agent() -> Agent[WorkerEffects, str]:
    """The current reference worker agent (contract: prompt catalog 1.0.1, strict envelope)."""
    tools: list[Tool[WorkerEffects]] = [
        Tool(
            read_run_evidence,
            description=prompts.READ_RUN_EVIDENCE[prompts.CURRENT_CATALOG],
            prepare=_advertise_envelope,
            metadata={"grant": GRANTS["read_run_evidence"]},
            max_retries=0,
        ),
        Tool(list_files, description=prompts.LIST_FILES, metadata={"grant": GRANTS["list_files"]}),
        Tool(read_file, description=prompts.READ_FILE, metadata={"grant": GRANTS["read_file"]}),
        Tool(
            run_command, description=prompts.RUN_COMMAND, metadata={"grant": GRANTS["run_command"]}
        ),
    ]
    return Agent(
        deps_type=WorkerEffects,  # type: ignore[type-abstract]
        output_type=str,
        instructions=prompts.INSTRUCTIONS,
        tools=tools,
        model_settings=MODEL_SETTINGS,
    )


async def execute_agentic(task: AgenticTask, model: Model, effects: WorkerEffects) -> str:
    """Run the installed worker on ``task`` with ``model``; returns the final text output."""
    agent = build_agent()
    result = await agent.run(
        task.prompt,
        model=model,
        deps=effects,
        message_history=list(task.message_history) or None,
        usage=task.usage,
        usage_limits=task.usage_limits,
        run_id=task.run_id,
        conversation_id=task.conversation_id,
    )
    return result.output
