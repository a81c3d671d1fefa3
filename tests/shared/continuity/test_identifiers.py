"""The identifier rule accepts exactly 1..128 characters of [A-Za-z0-9._:-]."""

from __future__ import annotations

import pytest

from shared.continuity.identifiers import IDENTIFIER, check_identifier
from shared.runtime.errors import InvalidArgument


@pytest.mark.parametrize("value", ["req-1\n", "\nreq-1", "req-1\r", ""])
def test_a_line_break_or_nothing_is_not_an_identifier(value: str) -> None:
    assert not IDENTIFIER.match(value)
    with pytest.raises(InvalidArgument):
        check_identifier("request_id", value)


def test_the_longest_identifier_passes() -> None:
    check_identifier("request_id", "a" * 128)
    assert not IDENTIFIER.match("a" * 129)
