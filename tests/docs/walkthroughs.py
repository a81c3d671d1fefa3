"""The guides' runnable walkthroughs (docs/guide/): which shell blocks they are, how they run.

A shell block runs when the line before its fence (blank lines aside) is the HTML comment
``<!-- walkthrough: NAME -->`` or ``<!-- walkthrough: NAME, refused -->``. Blocks run in file
order, each walkthrough NAME in one bash process of its own (``set -euo pipefail``), so variables
carry from a walkthrough's block to its next as they do in a reader's terminal. A ``refused`` block
runs in a subshell and must fail; what it sets is not kept.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

MARKER = re.compile(r"^<!--\s*walkthrough:\s*([a-z0-9-]+)\s*(,\s*refused\s*)?-->\s*$")
SHELL_FENCES = ("```sh", "```bash", "```shell")
# A liveness bound, generous: the worker walkthrough runs a whole continuation in one block.
BLOCK_SECONDS = 180.0


class WalkthroughError(AssertionError):
    """A guide's block that did not behave, named by walkthrough, document, line and heading."""


@dataclass(frozen=True)
class Block:
    """One runnable shell block of a Markdown document."""

    walkthrough: str
    refused: bool
    document: str  # the file it is in, as the failure names it
    line: int  # 1-based line of the opening fence
    heading: str  # the nearest heading above it
    text: str

    def describe(self) -> str:
        refused = ", refused" if self.refused else ""
        where = f"{self.document}:{self.line} ({self.heading})"
        return f"walkthrough {self.walkthrough!r}{refused} block at {where}"


def walkthrough_blocks(markdown: str, document: str) -> list[Block]:
    """Every marked shell block of ``document`` (its text ``markdown``), in file order. A marker
    not followed by a shell fence, or a fence that is never closed, is an error: a block the
    author meant to run must run."""
    lines = markdown.splitlines()
    blocks: list[Block] = []
    heading = "(top)"
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("#"):
            heading = line.strip()
        marker = MARKER.match(line)
        index += 1
        if marker is None:
            continue
        while index < len(lines) and not lines[index].strip():
            index += 1
        if index == len(lines) or lines[index].strip() not in SHELL_FENCES:
            raise WalkthroughError(
                f"{document}:{index}: a walkthrough marker must be followed by a shell block "
                f"({' / '.join(SHELL_FENCES)})"
            )
        fence_line = index + 1
        index += 1
        body: list[str] = []
        while index < len(lines) and lines[index].strip() != "```":
            body.append(lines[index])
            index += 1
        if index == len(lines):
            raise WalkthroughError(f"{document}:{fence_line}: the shell block is never closed")
        index += 1
        blocks.append(
            Block(
                marker.group(1),
                marker.group(2) is not None,
                document,
                fence_line,
                heading,
                "\n".join(body),
            )
        )
    return blocks


def names_in_order(blocks: Iterable[Block]) -> list[str]:
    """The walkthrough names, in the order of their first block."""
    return list(dict.fromkeys(block.walkthrough for block in blocks))


class Shell:
    """One bash process for one walkthrough. Each block is written to a file and sourced with
    stdin from /dev/null (so no command can read the next block as its input); its output goes
    to a file, and a second file marks that it finished."""

    def __init__(self, name: str, workdir: Path, scratch: Path, env: Mapping[str, str]) -> None:
        self.name = name
        self.scratch = scratch
        self.log = (scratch / f"{name}.shell.log").open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            stdin=subprocess.PIPE,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env=dict(env),
            text=True,
            start_new_session=True,  # its own process group: a hung block's children end with it
        )
        self._send("set -euo pipefail")

    def _send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def run(self, block: Block, number: int) -> str:
        """Run ``block``; its output. Raises :class:`WalkthroughError` naming it when it errs
        (or, marked refused, when it succeeds)."""
        stem = self.scratch / f"{number:02d}-{self.name}"
        script, output, done = (stem.with_suffix(suffix) for suffix in (".sh", ".out", ".done"))
        script.write_text(block.text + "\n", encoding="utf-8")
        quoted = {path: shlex.quote(str(path)) for path in (script, output, done)}
        if block.refused:
            # A subshell inherits errexit; the walkthrough's shell survives its failure.
            self._send(
                f"set +e; ( source {quoted[script]} ) </dev/null >{quoted[output]} 2>&1; "
                f"echo $? >{quoted[done]}; set -e"
            )
        else:
            self._send(
                f"source {quoted[script]} </dev/null >{quoted[output]} 2>&1; echo 0 >{quoted[done]}"
            )
        status = self._wait(done)

        def failure(what: str) -> WalkthroughError:
            text = output.read_text(encoding="utf-8", errors="replace") if output.exists() else ""
            return WalkthroughError(
                f"{block.describe()} {what}\n--- block ---\n{block.text}\n"
                f"--- output (last 60 lines) ---\n" + "\n".join(text.splitlines()[-60:])
            )

        if status is None:
            raise failure(f"exited with status {self.process.returncode}")
        if block.refused and status == 0:
            raise failure("was expected to be refused but succeeded")
        return output.read_text(encoding="utf-8", errors="replace")

    def _wait(self, done: Path) -> int | None:
        """The block's status once it finished; None when the shell exited (errexit)."""
        deadline = time.monotonic() + BLOCK_SECONDS
        while time.monotonic() < deadline:
            if done.exists():
                text = done.read_text(encoding="utf-8").strip()
                if text:
                    return int(text)
            if self.process.poll() is not None:
                return None
            time.sleep(0.05)
        self.close()
        raise WalkthroughError(f"walkthrough {self.name!r}: a block ran past {BLOCK_SECONDS} s")

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


def run_blocks(
    blocks: Sequence[Block], workdir: Path, scratch: Path, env: Mapping[str, str]
) -> dict[Block, str]:
    """Run ``blocks`` in order, one shell per walkthrough; each block's output."""
    shells: dict[str, Shell] = {}
    outputs: dict[Block, str] = {}
    try:
        for number, block in enumerate(blocks, start=1):
            if block.walkthrough not in shells:
                shells[block.walkthrough] = Shell(block.walkthrough, workdir, scratch, env)
            outputs[block] = shells[block.walkthrough].run(block, number)
    finally:
        for shell in shells.values():
            shell.close()
    return outputs
