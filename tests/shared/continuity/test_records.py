"""Frozen records built in bulk are the instances their constructors build."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.candidate.domain.model import REQUIREMENTS, Entry, Hold, HoldReason, build_entry, hold
from services.ledger.domain.journal import StoredEntry, build_stored_entry
from shared.continuity.records import direct_constructor

TEXT = st.text(max_size=20)
ENTRY_VALUES = st.tuples(TEXT, st.integers(), TEXT, TEXT, TEXT, TEXT, TEXT, TEXT)


@given(ENTRY_VALUES)
def test_a_built_entry_is_the_entry_its_constructor_builds(values: tuple[Any, ...]) -> None:
    for cls, build in ((Entry, build_entry), (StoredEntry, build_stored_entry)):
        expected = cls(*values)
        names = [f.name for f in dataclasses.fields(cls)]
        for built in (build(*values), build(**dict(zip(names, values, strict=True)))):
            assert type(built) is cls
            assert built == expected
            assert hash(built) == hash(expected)
            assert repr(built) == repr(expected)
            assert dataclasses.astuple(built) == values


def test_a_built_entry_stays_frozen_and_parses_its_payload_on_first_use() -> None:
    entry = build_entry("run-1", 1, "run_started", '{"a":"b"}', "p", "h", "actor", "t")
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.kind = "run_held"  # type: ignore[misc]
    assert entry.payload == {"a": "b"}
    assert entry.text("a") == "b"
    assert entry == Entry("run-1", 1, "run_started", '{"a":"b"}', "p", "h", "actor", "t")


@given(st.sampled_from(HoldReason), TEXT, TEXT)
def test_a_hold_is_the_hold_its_constructor_builds(
    reason: HoldReason, subject: str, detail: str
) -> None:
    assert hold(reason, subject, detail) == Hold(reason, REQUIREMENTS[reason], detail, subject)


def test_a_wrong_number_of_values_is_refused_as_the_constructor_refuses() -> None:
    with pytest.raises(TypeError):
        build_entry("run-1", 1)
    with pytest.raises(TypeError):
        build_stored_entry(*range(9))


@dataclass
class _Mutable:
    value: int


@dataclass(frozen=True)
class _Defaulted:
    value: int = 0


@dataclass(frozen=True)
class _Factory:
    values: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class _PostInit:
    value: int

    def __post_init__(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class _Slotted:
    value: int


@dataclass(frozen=True)
class _NotInit:
    value: int = field(init=False, default=0)


@dataclass(frozen=True)
class _Shadowing:
    instance: int


@pytest.mark.parametrize(
    "cls", [_Mutable, _Defaulted, _Factory, _PostInit, _Slotted, _NotInit, _Shadowing, int]
)
def test_what_it_would_not_build_alike_is_refused_when_the_constructor_is_made(cls: type) -> None:
    with pytest.raises(TypeError):
        direct_constructor(cls)


def test_a_cached_property_is_kept_per_instance() -> None:
    @dataclass(frozen=True)
    class Doubled:
        value: int

        @functools.cached_property
        def twice(self) -> int:
            return self.value * 2

    build = direct_constructor(Doubled)
    one, two = build(1), build(2)
    assert (one.twice, two.twice) == (2, 4)
