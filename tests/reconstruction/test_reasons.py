"""The declared reason sets are exactly the reasons the reconstruction code raises or reports."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from services.reconstruction.domain import ANALYSIS_REASONS, REFUSAL_REASONS

SERVICE = Path(__file__).resolve().parents[2] / "services" / "reconstruction"
# The agent the service replays and resumes (moved out of the service, still its code).
AGENT = Path(__file__).resolve().parents[2] / "shared" / "agent"
REASON = re.compile(r"^[A-Z][A-Z0-9_]+$")
# Calls whose first argument is a reason: an analysis finding, or a refusal (the domain's own
# helpers build FailedPrecondition with the reason they are given).
FINDINGS = frozenset({"Hold"})
REFUSALS = frozenset({"FailedPrecondition", "InvalidArgument", "_refuse", "_refuse_field"})
# Shared refusal builders with a fixed reason (shared/runtime/errors.py).
BUILDERS = {"field_required": "FIELD_REQUIRED"}


def _literal_reasons(names: frozenset[str], builders: dict[str, str] | None = None) -> set[str]:
    found: set[str] = set()
    for path in [*SERVICE.rglob("*.py"), *AGENT.rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if builders and name in builders:
                found.add(builders[name])
            first = node.args[0]
            if (
                name in names
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and REASON.match(first.value)
            ):
                found.add(first.value)
    return found


def test_analysis_reasons_are_exactly_the_findings_the_analysis_reports() -> None:
    assert _literal_reasons(FINDINGS) == ANALYSIS_REASONS


def test_refusal_reasons_are_exactly_the_refusals_the_service_raises() -> None:
    assert _literal_reasons(REFUSALS, BUILDERS) == REFUSAL_REASONS


def test_findings_and_refusals_do_not_overlap() -> None:
    assert not ANALYSIS_REASONS & REFUSAL_REASONS
