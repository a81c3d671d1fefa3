"""A recovery workflow stays in its own folder: the product files that name a registered workflow
stay within the budget a fourth workflow is held to (16 non-test files; docs/workflows/README.md,
"Add a recovery workflow"; ADR 0054).

A file names a workflow when its path or its text holds the workflow's stored name as a whole
identifier (its package, a module named after it, the name itself) or one of its RPC names (and so
their messages). Counted: the contract (``protos/``) and the product (``services/``, ``shared/``,
``tools/``, ``deploy/``); not counted: tests, generated code (``shared/gen``, the audit vectors
``make vectors`` writes) and the files of another workflow's own package (a workflow that follows
this one names it there, and those files are that workflow's). A longer identifier that contains
the name (the policy switch ``allow_readonly_observation_recovery``, the witness kind
``readonly_observation_recovery``) is a fact of its own and not counted here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from shared.continuity.recovery import WORKFLOWS, Workflow

ROOT = Path(__file__).resolve().parents[2]
#: A fourth workflow touches at most this many non-test files (the issue's goal).
BUDGET = 16
PRODUCT = ("protos", "services", "shared", "tools", "deploy")
GENERATED = ("shared/gen", "tools/audit/vectors/v1")
SKIPPED_DIRECTORIES = frozenset({"__pycache__", "node_modules"})
PACKAGES = "shared/continuity/recovery"


def product_files(root: Path) -> list[str]:
    """Every non-test, non-generated text file of the contract and the product, relative."""
    found: list[str] = []
    for top in PRODUCT:
        for path in sorted((root / top).rglob("*")):
            relative = path.relative_to(root).as_posix()
            if (
                not path.is_file()
                or SKIPPED_DIRECTORIES & set(path.parts)
                or any(relative.startswith(f"{generated}/") for generated in GENERATED)
            ):
                continue
            found.append(relative)
    return found


def naming_pattern(workflow: Workflow) -> re.Pattern[str]:
    rpcs = (workflow.rpcs.candidate.name, workflow.rpcs.submit.name, workflow.rpcs.read.name)
    return re.compile(
        "|".join([rf"\b{re.escape(workflow.name)}\b", *(re.escape(rpc) for rpc in rpcs)])
    )


def files_naming(
    workflow: Workflow, root: Path, files: Iterable[str], others: Iterable[str]
) -> list[str]:
    """The files of ``files`` that name ``workflow``, leaving out the packages of ``others``."""
    pattern = naming_pattern(workflow)
    foreign = tuple(f"{PACKAGES}/{other}/" for other in others if other != workflow.name)
    named: list[str] = []
    for relative in files:
        if relative.startswith(foreign):
            continue
        try:
            text = (root / relative).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # a binary file names nothing
        if pattern.search(relative) or pattern.search(text):
            named.append(relative)
    return named


@pytest.mark.parametrize("name", list(WORKFLOWS))
def test_a_workflow_is_named_by_at_most_the_budgets_files(name: str) -> None:
    named = files_naming(WORKFLOWS[name], ROOT, product_files(ROOT), WORKFLOWS)
    assert len(named) <= BUDGET, f"{name} is named by {len(named)} files:\n" + "\n".join(named)
    # its own package is among them: the count reads the tree it is meant to
    assert any(path.startswith(f"{PACKAGES}/{name}/") for path in named)


def test_a_workflow_spread_over_more_files_is_over_the_budget(tmp_path: Path) -> None:
    """The count is not blind: a workflow whose parts are spread around again fails it, a longer
    identifier or another workflow's package does not count, tests and generated code do not."""
    workflow = WORKFLOWS["never_claimed"]
    spread = [f"services/part_{index}/rules.py" for index in range(BUDGET)]
    for relative in [*spread, "shared/continuity/never_claimed_rules.py"]:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(f"WORKFLOW = {workflow.name!r}\n")
    not_naming = {
        "services/policy.py": f"allow_{workflow.name}_recovery = True\n",
        f"{PACKAGES}/other_workflow/custody.py": f"FOLLOWS = ({workflow.name!r},)\n",
        "shared/gen/forge/contract_pb2.py": f"{workflow.rpcs.submit.name} = 1\n",
        "tests/recovery/test_it.py": f"{workflow.name} = 1\n",
    }
    for relative, text in not_naming.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    (tmp_path / "services/stub.py").write_text(f"stub.{workflow.rpcs.candidate.name}(request)\n")

    named = files_naming(
        workflow, tmp_path, product_files(tmp_path), [workflow.name, "other_workflow"]
    )
    assert sorted(named) == sorted(
        [*spread, "shared/continuity/never_claimed_rules.py", "services/stub.py"]
    )
    assert len(named) > BUDGET
