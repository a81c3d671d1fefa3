"""What the worker's tools do: the configured source tree, its granted commands and the run
evidence. ``SourceEffects`` is the live counterpart of the adapter's ``LocalEffects``: paths stay
inside the source tree, and a command runs only when granted exactly as listed."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from services.worker.ledger_port import LedgerPort
from services.worker.stopping import EffectBounds, unbounded

#: Items per evidence page, as in the adapter's LocalEffects.
PAGE_ITEMS: Final = 20
#: Bytes of a command's stdout and stderr returned to the model (the tail is kept).
OUTPUT_TAIL: Final = 4000
#: Seconds between looks at a stop request while a command runs.
WAIT_SLICE: Final = 0.2


class EvidenceStore(Protocol):
    """Recorded run evidence, by the run and kind a ``read_run_evidence`` query names."""

    def items(self, run_id: str, kind: str) -> Sequence[Any]: ...


@dataclass(frozen=True)
class DirectoryEvidence:
    """``<root>/<run_id>/<kind>.json``: a JSON list of items; a missing file has none."""

    root: Path

    def items(self, run_id: str, kind: str) -> Sequence[Any]:
        path = (self.root / run_id / f"{kind}.json").resolve()
        if not path.is_relative_to(self.root) or not path.is_file():
            return []
        value = json.loads(path.read_text(encoding="utf-8"))
        return value if isinstance(value, list) else []


@dataclass(frozen=True)
class JournalEvidence:
    """The ledger journal of the run the query names: its ``log`` is the journal's entries."""

    port: LedgerPort

    def items(self, run_id: str, kind: str) -> Sequence[Any]:
        if kind != "log":
            return []
        try:
            entries = self.port.journal(run_id)
        except Exception:  # noqa: BLE001 - an unknown run has no evidence
            return []
        return [
            {"sequence": e.sequence, "kind": e.kind, "recorded_at": e.recorded_at.ToJsonString()}
            for e in entries
        ]


#: The only variables a granted command inherits: the worker's ledger token, provider key and any
#: other secret of its environment never reach a command the model asked for.
COMMAND_ENVIRONMENT: Final = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM")


def command_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The scrubbed environment of a granted command."""
    environ = os.environ if environ is None else environ
    return {name: environ[name] for name in COMMAND_ENVIRONMENT if name in environ}


@dataclass
class SourceEffects:
    """The worker's effects over ``root`` (see the module docstring)."""

    root: Path
    evidence: EvidenceStore
    granted_commands: frozenset[tuple[str, ...]] = frozenset()
    command_timeout_seconds: float = 300.0
    #: The stop request and the lease every command is started under.
    bounds: EffectBounds = field(default_factory=unbounded)
    ran: list[dict[str, Any]] = field(default_factory=list)

    def _inside(self, path: str) -> Path:
        resolved = (self.root / path).resolve()
        if not resolved.is_relative_to(self.root.resolve()):
            raise PermissionError(f"{path!r} is outside the source tree")
        return resolved

    def read_evidence(self, query: Mapping[str, Any]) -> dict[str, Any]:
        items = list(self.evidence.items(str(query["run_id"]), str(query["kind"])))
        page = int(query.get("page", 10))
        return {"status": "ok", "items": items[(page - 1) * PAGE_ITEMS : page * PAGE_ITEMS]}

    def list_files(self, path: str) -> list[str]:
        base, root = self._inside(path), self.root.resolve()
        return sorted(str(p.relative_to(root)) for p in base.rglob("*") if p.is_file())

    def read_file(self, path: str) -> str:
        return self._inside(path).read_text(encoding="utf-8")

    def granted(self, argv: Sequence[str]) -> bool:
        return tuple(argv) in self.granted_commands

    def run_command(self, argv: Sequence[str]) -> dict[str, Any]:
        """Run a granted command in the source tree (the caller charged it first), with its
        timeout cut to what is left of the lease; a stop request past its grace kills it and
        raises :class:`WorkerInterrupted` (no outcome: the intent stays open)."""
        if not self.granted(argv):
            raise PermissionError(f"command not granted: {list(argv)!r}")
        timeout = self.bounds.start(self.command_timeout_seconds)
        process = subprocess.Popen(
            list(argv),
            cwd=self.root,
            env=command_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        stdout, stderr = self._wait(process, list(argv), timeout)
        result = {
            "exit_code": process.returncode,
            "stdout": stdout[-OUTPUT_TAIL:],
            "stderr": stderr[-OUTPUT_TAIL:],
        }
        self.ran.append({"argv": list(argv), "exit_code": process.returncode})
        return result

    def _wait(
        self, process: subprocess.Popen[str], argv: list[str], timeout: float
    ) -> tuple[str, str]:
        """The command's output once it ends; killed at ``timeout`` (TimeoutExpired, a failed
        outcome) or when a stop's grace is over (WorkerInterrupted, no outcome)."""
        deadline = time.monotonic() + timeout
        shutdown = self.bounds.shutdown
        while True:
            left = deadline - time.monotonic()
            try:
                return process.communicate(timeout=max(0.0, min(WAIT_SLICE, left)))
            except subprocess.TimeoutExpired:
                if shutdown.abandon_now() or time.monotonic() >= deadline:
                    process.kill()
                    process.communicate()
                    shutdown.check()
                    raise subprocess.TimeoutExpired(argv, timeout) from None
