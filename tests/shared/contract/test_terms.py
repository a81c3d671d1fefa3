"""Contract enum names: the short names the domain speaks, to and from every contract enum."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forge.continuity.v1 import common_pb2
from shared.contract.terms import enum_number, enum_prefix, enum_short_name

ENUMS: tuple[Any, ...] = tuple(
    getattr(common_pb2, descriptor.name)
    for descriptor in common_pb2.DESCRIPTOR.enum_types_by_name.values()
)


@pytest.mark.parametrize("enum", ENUMS, ids=lambda e: e.DESCRIPTOR.name)
def test_every_value_reads_as_its_unprefixed_name_and_back_in_any_case(enum: Any) -> None:
    prefix = enum_prefix(enum)
    for value in enum.DESCRIPTOR.values:
        short = enum_short_name(enum, value.number)
        assert short == enum.Name(value.number).removeprefix(prefix)
        assert enum_number(enum, short) == value.number
        assert enum_number(enum, short.lower()) == value.number


@pytest.mark.parametrize("enum", ENUMS, ids=lambda e: e.DESCRIPTOR.name)
@given(number=st.integers(-(2**31), 2**31 - 1), name=st.text(max_size=30))
def test_anything_else_is_refused_as_protobuf_refuses_it(enum: Any, number: int, name: str) -> None:
    numbers = {v.number for v in enum.DESCRIPTOR.values}
    if number not in numbers:
        with pytest.raises(ValueError, match="no name defined"):
            enum_short_name(enum, number)
    prefixed = enum_prefix(enum) + name.upper()
    if prefixed not in enum.DESCRIPTOR.values_by_name:
        with pytest.raises(ValueError, match="no value defined"):
            enum_number(enum, name)
    else:
        assert enum_number(enum, name) == enum.Value(prefixed)
