"""A check that reads a journal must page: one ReadJournal page holds at most 1000 entries (fewer
past about 1 MiB of payloads), so a check that reads one page finds later entries "lost" once a
run grows past it. The checks read through tests.support.whole_journal instead."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).parent
# A ReadJournal request that starts at the beginning and asks for one full page.
ONE_PAGE = re.compile(r"ReadJournalRequest\((?:(?!from_sequence)[^)])*page_size=1000\)")


def test_no_check_reads_a_journal_as_one_page() -> None:
    offenders = [
        f"{path.relative_to(TESTS)}:{text[: match.start()].count(chr(10)) + 1}"
        for path in sorted(TESTS.rglob("*.py"))
        for text in [path.read_text(encoding="utf-8")]
        for match in ONE_PAGE.finditer(text)
    ]
    assert offenders == [], "read the journal with tests.support.whole_journal"
