"""The README works when followed literally: its walkthrough blocks run, in order, against `make
run` on a clean database, with the real grpcurl, curl and CLI. The walkthroughs also run in the
reverse order on another clean database, and name only ids of their own, so none leans on ids or
state another one made: each of any two runs once before the other."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.docs.make_run import (
    ROOT,
    missing_tools,
    reader_directory,
    reader_environment,
    running_services,
)
from tests.docs.walkthroughs import (
    Block,
    WalkthroughError,
    names_in_order,
    run_blocks,
    walkthrough_blocks,
)

README = ROOT / "README.md"
#: The walkthroughs the README promises, in its order (its "Walkthroughs against make run").
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


def readme_blocks() -> list[Block]:
    return walkthrough_blocks(README.read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def _tools() -> None:
    if missing := missing_tools():
        pytest.fail(f"the README's walkthroughs need {', '.join(missing)}: run `make install`")


def run_against_make_run(blocks: list[Block], tmp_path: Path) -> dict[Block, str]:
    with running_services(tmp_path / "make-run") as services:
        env = reader_environment(services, tmp_path)
        scratch = tmp_path / "blocks"
        scratch.mkdir()
        try:
            return run_blocks(blocks, reader_directory(tmp_path), scratch, env, "README.md")
        except WalkthroughError as failure:
            raise WalkthroughError(
                f"{failure}\n--- make run (last lines) ---\n"
                + "\n".join(services.log().splitlines()[-30:])
            ) from None


def test_the_readme_marks_each_walkthrough_and_its_refusals() -> None:
    blocks = readme_blocks()
    assert names_in_order(blocks) == WALKTHROUGHS
    refused = [block for block in blocks if block.refused]
    assert {block.walkthrough for block in refused} == {"grpcurl", "http"}


def test_every_walkthrough_runs_in_order_against_make_run(tmp_path: Path) -> None:
    blocks = readme_blocks()
    outputs = run_against_make_run(blocks, tmp_path)
    # What the blocks say they did, checked where the README shows it.
    everything = "\n".join(outputs.values())
    for run_id in ("run-grpc-1", "run-http-1", "run-console-1", "run-cli-1"):
        assert f"seeded held run {run_id}" in everything
    assert "POLICY_REVISION_STALE" in everything
    assert "RUN_NOT_FOUND" in everything
    assert "VERIFIED  run run-cli-1" in everything
    verified = [out for block, out in outputs.items() if "journal:verify" in block.text]
    assert verified and json.loads(verified[-1].splitlines()[-1])["valid"] is True
    # The journal paging loop prints what the README shows after it.
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
    order = names_in_order(readme_blocks())
    # A stable sort: each walkthrough's own blocks keep their order.
    blocks = sorted(readme_blocks(), key=lambda block: -order.index(block.walkthrough))
    outputs = run_against_make_run(blocks, tmp_path)
    assert "VERIFIED  run run-cli-1" in "\n".join(outputs.values())


def test_each_walkthrough_names_only_ids_of_its_own() -> None:
    foreign = [
        f"{block.walkthrough} (line {block.line}): {found.group(0)}"
        for block in readme_blocks()
        for found in IDS.finditer(block.text)
        if found.group(2) != ID_PREFIXES[block.walkthrough]
    ]
    assert not foreign, "ids of another walkthrough:\n" + "\n".join(foreign)


def test_the_walkthroughs_read_ids_generations_and_revisions_from_answers() -> None:
    written = [
        f"{block.walkthrough} (line {block.line}): {found.group(0)}"
        for block in readme_blocks()
        for found in HARD_CODED.finditer(block.text)
    ]
    assert not written, "written down instead of read from an answer:\n" + "\n".join(written)
    # The pattern finds what the README used to write down.
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
    blocks = walkthrough_blocks(markdown)
    with pytest.raises(WalkthroughError) as failure:
        run_blocks(blocks, tmp_path, tmp_path, {"PATH": "/usr/bin:/bin"}, "DOC.md")
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
    blocks = walkthrough_blocks(markdown)
    with pytest.raises(WalkthroughError, match="expected to be refused but succeeded"):
        outputs = run_blocks(blocks, tmp_path, tmp_path, {"PATH": "/usr/bin:/bin"}, "DOC.md")
    outputs = run_blocks(blocks[:2], tmp_path, tmp_path, {"PATH": "/usr/bin:/bin"}, "DOC.md")
    assert outputs[blocks[1]] == "after\n"


def test_a_marker_without_a_shell_block_is_an_error() -> None:
    with pytest.raises(WalkthroughError, match="must be followed by a shell block"):
        walkthrough_blocks(_document("<!-- walkthrough: demo -->", "```text", "x", "```"))
    with pytest.raises(WalkthroughError, match="never closed"):
        walkthrough_blocks(_document("<!-- walkthrough: demo -->", "```sh", "echo"))
