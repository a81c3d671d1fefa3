"""The documents name only paths that exist: every repository path the README and the documents
under docs/, deploy/ and tools/ write in backticks (`services/runner.py`, `tests/x.py::test_y`),
and every target of a Markdown link between them, heading anchors included. A file moved or
renamed without its documents fails here instead of leaving a newcomer a dead end."""

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Inline code: a span on one line.
CODE_SPAN = re.compile(r"`([^`\n]+)`")
#: A Markdown link or image target, the label possibly broken over lines.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
#: What a repository path is written with; anything else (a space, a placeholder such as
#: `<workflow>` or `{run_id}`, a glob, a variable) makes the span something other than a path.
PATH_TEXT = re.compile(r"^[A-Za-z0-9_./-]+$")
#: Spans that look like repository paths and are not: the elements a tool-contract migration
#: names (docs/formats.md), which begin with the contract's `tools`. A file that no longer
#: exists is named without backticks, saying so.
NOT_PATHS = {
    "tools/read_run_evidence/parameters_json_schema",
    "tools/read_run_evidence/description",
}
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT_ANCHOR = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")


def _ignored_patterns() -> list[str]:
    lines = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    return [line.strip().strip("/") for line in lines if line.strip() and not line.startswith("#")]


IGNORED = _ignored_patterns()


def is_ignored(relative: str) -> bool:
    """Whether ``relative`` is something the repository ignores (``var/``, ``.venv``,
    ``node_modules``): what running the project writes, not what it holds."""
    parts = relative.strip("/").split("/")
    for pattern in IGNORED:
        if "/" in pattern:
            if relative.strip("/") == pattern or relative.startswith(pattern + "/"):
                return True
        elif any(fnmatch.fnmatch(part, pattern) for part in parts):
            return True
    return False


#: Where the documents are besides the README. The changelog is left out: it records what each
#: release named, files since moved included.
DOCUMENT_FOLDERS = ("docs", "deploy", "tools")


def documents() -> list[Path]:
    """The README and every Markdown document under docs/, deploy/ and tools/."""
    found = [
        path
        for folder in DOCUMENT_FOLDERS
        for path in (ROOT / folder).rglob("*.md")
        if not is_ignored(path.relative_to(ROOT).as_posix())
    ]
    return [ROOT / "README.md", *sorted(found)]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, with their 1-based numbers: commands in a block
    name what a reader's run writes, which need not exist yet."""
    kept, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            kept.append((number, line))
    return kept


def repository_path(span: str) -> str | None:
    """The repository path a code span names, or None when it names none: a path has a ``/``
    and starts at a top-level directory of the repository (`services/...`, `docs/adr/`); a
    ``:name`` or ``::test`` after it names something inside the file."""
    path = span.split(":", 1)[0]
    if path in NOT_PATHS or "/" not in path or "..." in path or path.startswith("/"):
        return None
    if not PATH_TEXT.match(path):
        return None
    top = path.split("/", 1)[0]
    if not (ROOT / top).is_dir() or is_ignored(path):
        return None
    return path


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation and markup dropped, spaces as
    hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    """Every anchor a link may name in ``path``: its headings' slugs (a repeated one numbered as
    GitHub numbers it) and explicit ``<a id>``s."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        found.update(EXPLICIT_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if heading is None:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


@dataclass(frozen=True)
class Dead:
    document: str
    line: int
    named: str
    why: str

    def __str__(self) -> str:
        return f"{self.document}:{self.line}: {self.named} ({self.why})"


def dead_names(document: Path, home: Path = ROOT) -> list[Dead]:
    """Every path or link of ``document`` that leads nowhere. Links resolve beside the document;
    repository paths against the repository, wherever the document is (``home``: the directory
    its name is given from)."""
    name = document.relative_to(home).as_posix()
    lines = prose_lines(document.read_text(encoding="utf-8"))
    dead: list[Dead] = []
    for number, line in lines:
        for span in CODE_SPAN.findall(line):
            path = repository_path(span)
            if path is not None and not (ROOT / path).exists():
                dead.append(Dead(name, number, f"`{span}`", "no such path in the repository"))
    # A link's label may break over lines: look for links in the text of each paragraph.
    text = "\n".join(line for _, line in lines)
    numbers = [number for number, _ in lines]
    for match in LINK.finditer(text):
        target = match.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        number = numbers[text.count("\n", 0, match.start(1))]
        file_part, _, anchor = target.partition("#")
        linked = (document.parent / file_part).resolve() if file_part else document
        if not linked.exists():
            dead.append(Dead(name, number, target, "no such file"))
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            dead.append(Dead(name, number, target, f"no heading #{anchor} there"))
    return dead


@pytest.mark.parametrize(
    "document", documents(), ids=lambda path: path.relative_to(ROOT).as_posix()
)
def test_every_path_and_link_of_the_document_exists(document: Path) -> None:
    dead = dead_names(document)
    assert not dead, "paths and links that lead nowhere:\n" + "\n".join(map(str, dead))


def test_the_documents_include_the_guides_and_workflow_pages() -> None:
    named = {path.relative_to(ROOT).as_posix() for path in documents()}
    assert {"README.md", "docs/guide/walkthroughs.md", "docs/workflows/README.md"} <= named


# --- the check itself: what it counts as a path, and that a dead one is found ------------------


def test_what_counts_as_a_repository_path() -> None:
    assert repository_path("services/runner.py") == "services/runner.py"
    assert repository_path("services/admission/domain.py:require_window") == (
        "services/admission/domain.py"
    )
    assert repository_path("tests/docs/test_document_paths.py::test_x") == (
        "tests/docs/test_document_paths.py"
    )
    for not_a_path in (
        "var/continuity.db",  # written by make run
        ".venv/bin/grpcurl",  # written by make install
        "tools/node_modules/",
        "shared/continuity/recovery/<workflow>.py",  # a placeholder
        "application/x-ndjson",  # no such top-level directory
        "GET /api/v1/runs",
        "reasons.py",
    ):
        assert repository_path(not_a_path) is None, not_a_path


def test_a_missing_path_a_dead_link_and_a_missing_heading_are_named(tmp_path: Path) -> None:
    guide = ROOT / "docs" / "guide"
    text = "\n".join(
        [
            "# Title",
            "",
            "See `services/no_such_module.py` and `services/runner.py:main`, [the",
            "guide](no-such-guide.md), [the console](console.md#no-such-heading) and",
            "[the tour](../../README.md#a-five-minute-tour).",
            "",
            "```sh",
            "cat services/also_missing.py   # commands in a block are not checked",
            "```",
        ]
    )
    scratch = tmp_path / "docs" / "guide"
    scratch.mkdir(parents=True)
    probe = scratch / "walkthroughs.md"
    probe.write_text(text, encoding="utf-8")
    (scratch / "console.md").write_text((guide / "console.md").read_text("utf-8"))
    (tmp_path / "README.md").write_text((ROOT / "README.md").read_text(encoding="utf-8"))
    found = [(dead.line, dead.named) for dead in dead_names(probe, tmp_path)]
    assert found == [
        (3, "`services/no_such_module.py`"),
        (4, "no-such-guide.md"),
        (4, "console.md#no-such-heading"),
    ]
