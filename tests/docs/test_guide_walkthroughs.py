"""The guides work when followed literally: their walkthrough blocks (docs/guide/) run, in order,
against `make run` on a clean database, with the real grpcurl, curl and CLI. The walkthroughs
also run in the reverse order on another clean database, and name only ids of their own, so none
leans on ids or state another one made: each of any two runs once before the other."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.docs.make_run import (
    NOT_MIRRORED,
    missing_tools,
    reader_directory,
    reader_environment,
    running_services,
)
from tests.docs.walkthroughs import (
    MARKER,
    Block,
    WalkthroughError,
    names_in_order,
    run_blocks,
    walkthrough_blocks,
)
from tests.runner_process import ROOT

GUIDE = ROOT / "docs" / "guide"
#: The guides with walkthrough blocks, in the order they run (docs/guide/walkthroughs.md lists
#: them so), which is the order they had as sections of the README.
GUIDES = [
    "grpcurl.md",
    "http.md",
    "console.md",
    "cli.md",
    "worker.md",
    "what-is-available.md",
]
#: The walkthroughs the guides promise, in their order.
WALKTHROUGHS = ["grpcurl", "http", "console", "cli", "worker"]
#: The prefix of every run, request and reconciliation id a walkthrough names.
ID_PREFIXES = {
    "grpcurl": "grpc",
    "http": "http",
    "console": "console",
    "cli": "cli",
    "worker": "worker",
}
IDS = re.compile(r"\b(run|req|rcn)-([a-z]+)-[a-z0-9]+")
#: What a walkthrough must read from an earlier answer instead of writing it down: an execution
#: request id, a lease generation, the policy revision a write expects, a run's attempt.
HARD_CODED = re.compile(
    r"exr_[0-9a-f]{4,}|(lease_generation|expected_revision)\W{1,4}\d|attempt_id\W{1,6}run-"
)


def guide_blocks() -> list[Block]:
    """Every walkthrough block of the guides, guide by guide in the order of ``GUIDES``."""
    return [
        block
        for name in GUIDES
        for block in walkthrough_blocks(
            (GUIDE / name).read_text(encoding="utf-8"), f"docs/guide/{name}"
        )
    ]


def documents_with_markers() -> set[str]:
    """Every Markdown file of the repository with a walkthrough marker, relative to its root."""
    found = set()
    for path in ROOT.glob("**/*.md"):
        relative = path.relative_to(ROOT)
        if relative.parts[0] in NOT_MIRRORED or "node_modules" in relative.parts:
            continue
        if any(MARKER.match(line) for line in path.read_text(encoding="utf-8").splitlines()):
            found.add(relative.as_posix())
    return found


@pytest.fixture(autouse=True)
def _tools() -> None:
    if missing := missing_tools():
        pytest.fail(f"the guides' walkthroughs need {', '.join(missing)}: run `make install`")


def run_against_make_run(blocks: list[Block], tmp_path: Path) -> dict[Block, str]:
    with running_services(tmp_path / "make-run") as services:
        env = reader_environment(services, tmp_path)
        scratch = tmp_path / "blocks"
        scratch.mkdir()
        try:
            return run_blocks(blocks, reader_directory(tmp_path), scratch, env)
        except WalkthroughError as failure:
            raise WalkthroughError(
                f"{failure}\n--- make run (last lines) ---\n"
                + "\n".join(services.log().splitlines()[-30:])
            ) from None


def test_every_marked_block_is_in_a_guide_the_test_runs() -> None:
    # A marker in a document the test does not read would be a block nobody runs.
    assert documents_with_markers() == {f"docs/guide/{name}" for name in GUIDES}


def test_the_guides_mark_each_walkthrough_and_its_refusals() -> None:
    blocks = guide_blocks()
    assert names_in_order(blocks) == WALKTHROUGHS
    refused = [block for block in blocks if block.refused]
    assert {block.walkthrough for block in refused} == {"grpcurl", "http"}


def test_every_walkthrough_runs_in_order_against_make_run(tmp_path: Path) -> None:
    blocks = guide_blocks()
    outputs = run_against_make_run(blocks, tmp_path)
    # What the blocks say they did, checked where the guides show it.
    everything = "\n".join(outputs.values())
    for run_id in ("run-grpc-1", "run-http-1", "run-console-1", "run-cli-1"):
        assert f"seeded held run {run_id}" in everything
    assert "POLICY_REVISION_STALE" in everything
    assert "RUN_NOT_FOUND" in everything
    assert "VERIFIED  run run-cli-1" in everything
    verified = [out for block, out in outputs.items() if "journal:verify" in block.text]
    assert verified and json.loads(verified[-1].splitlines()[-1])["valid"] is True
    # The journal paging loop prints what the grpcurl guide shows after it.
    paged = next(out for block, out in outputs.items() if "while [" in block.text)
    assert paged.splitlines() == [
        "[('1', 'JOURNAL_ENTRY_KIND_RUN_STARTED')] next_sequence 2",
        "[('2', 'JOURNAL_ENTRY_KIND_RUN_HELD')] next_sequence 0",
    ]
    # The audit walkthrough pins the keys, keeps the witnessed heads and exports under var/.
    written = tmp_path / "repository" / "var"
    for name in ("run-cli-1.audit.jsonl", "signing-keys.json", "heads.jsonl"):
        assert (written / name).exists(), name
        assert not (ROOT / name).exists(), name
    assert "witnessed      " in everything
    # The worker block ran the reference worker to completion against the scripted provider.
    assert "continuity state: completed" in everything, everything[-3000:]
    assert "13 of 22 commands used" in everything


def test_the_walkthroughs_run_in_reverse_order_on_a_clean_database(tmp_path: Path) -> None:
    order = names_in_order(guide_blocks())
    # A stable sort: each walkthrough's own blocks keep their order.
    blocks = sorted(guide_blocks(), key=lambda block: -order.index(block.walkthrough))
    outputs = run_against_make_run(blocks, tmp_path)
    assert "VERIFIED  run run-cli-1" in "\n".join(outputs.values())


def test_each_walkthrough_names_only_ids_of_its_own() -> None:
    foreign = [
        f"{block.walkthrough} ({block.document}:{block.line}): {found.group(0)}"
        for block in guide_blocks()
        for found in IDS.finditer(block.text)
        if found.group(2) != ID_PREFIXES[block.walkthrough]
    ]
    assert not foreign, "ids of another walkthrough:\n" + "\n".join(foreign)


def test_the_walkthroughs_read_ids_generations_and_revisions_from_answers() -> None:
    written = [
        f"{block.walkthrough} ({block.document}:{block.line}): {found.group(0)}"
        for block in guide_blocks()
        for found in HARD_CODED.finditer(block.text)
    ]
    assert not written, "written down instead of read from an answer:\n" + "\n".join(written)
    # The pattern finds what the README's walkthroughs used to write down.
    assert HARD_CODED.search('\\"lease_generation\\": 1, \\"attempt_id\\": \\"run-held-1-attempt-1')
    assert HARD_CODED.search("""-d '{"expected_revision": "1", "settings": {}}'""")


# --- the harness itself: a block that errs is named, a refusal that succeeds is caught ---------


def _document(*blocks: str) -> str:
    return "\n".join(["# Title", "", "## Section", "", *blocks])


def test_a_failing_block_is_named_and_stops_its_walkthrough(tmp_path: Path) -> None:
    markdown = _document(
        "<!-- walkthrough: demo -->",
        "```sh",
        "VALUE=$(echo kept)",
        "```",
        "",
        "<!-- walkthrough: demo -->",
        "```sh",
        'echo "$VALUE"',
        "false | cat",
        "echo never",
        "```",
    )
    blocks = walkthrough_blocks(markdown, "DOC.md")
    with pytest.raises(WalkthroughError) as failure:
        run_blocks(blocks, tmp_path, tmp_path, {"PATH": "/usr/bin:/bin"})
    message = str(failure.value)
    assert "walkthrough 'demo' block at DOC.md:11 (## Section) exited with status 1" in message
    assert "kept" in message and "never" not in message.split("--- output")[1]


def test_a_refused_block_must_fail_and_leaves_its_shell_running(tmp_path: Path) -> None:
    markdown = _document(
        "<!-- walkthrough: demo, refused -->",
        "```sh",
        "exit 3",
        "```",
        "<!-- walkthrough: demo -->",
        "```sh",
        "echo after",
        "```",
        "<!-- walkthrough: demo, refused -->",
        "```sh",
        "true",
        "```",
    )
    blocks = walkthrough_blocks(markdown, "DOC.md")
    with pytest.raises(WalkthroughError, match="expected to be refused but succeeded"):
        outputs = run_blocks(blocks, tmp_path, tmp_path, {"PATH": "/usr/bin:/bin"})
    outputs = run_blocks(blocks[:2], tmp_path, tmp_path, {"PATH": "/usr/bin:/bin"})
    assert outputs[blocks[1]] == "after\n"


def test_a_marker_without_a_shell_block_is_an_error() -> None:
    with pytest.raises(WalkthroughError, match="must be followed by a shell block"):
        walkthrough_blocks(_document("<!-- walkthrough: demo -->", "```text", "x", "```"), "DOC.md")
    with pytest.raises(WalkthroughError, match="never closed"):
        walkthrough_blocks(_document("<!-- walkthrough: demo -->", "```sh", "echo"), "DOC.md")
