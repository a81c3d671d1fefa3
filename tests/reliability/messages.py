"""Hostile requests built from the protobuf descriptors: hypothesis strategies for any request
message, and raw encodings the generated classes cannot express (unknown fields, a million
repeated elements)."""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

FD = FieldDescriptor
INT_RANGES = {
    FD.TYPE_INT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FD.TYPE_UINT32: (0, 2**32 - 1),
    FD.TYPE_FIXED32: (0, 2**32 - 1),
    FD.TYPE_INT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FD.TYPE_UINT64: (0, 2**64 - 1),
    FD.TYPE_FIXED64: (0, 2**64 - 1),
}
# Strings a service might trip over: JSON-looking, digest-looking, control characters, long.
TRICKY_STRINGS = st.sampled_from(
    ["", " ", "{}", "[]", "null", '{"a":', "sha256:" + "0" * 64, "sha256:", "\x00", "\n", "☃" * 64]
)


def _scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    if field.type in INT_RANGES:
        low, high = INT_RANGES[field.type]
        return st.one_of(st.integers(low, high), st.sampled_from([0, 1, -1, low, high]))
    if field.type == FD.TYPE_BOOL:
        return st.booleans()
    if field.type in (FD.TYPE_FLOAT, FD.TYPE_DOUBLE):
        return st.floats(allow_nan=True, allow_infinity=True, width=32)
    if field.type == FD.TYPE_STRING:
        return st.one_of(TRICKY_STRINGS, st.text(max_size=200))
    if field.type == FD.TYPE_BYTES:
        return st.binary(max_size=512)
    if field.type == FD.TYPE_ENUM:
        assert field.enum_type is not None
        numbers = [value.number for value in field.enum_type.values]
        return st.one_of(st.sampled_from(numbers), st.integers(-5, 1000))
    raise AssertionError(f"unhandled field type {field.type}")


def field_values(descriptor: Descriptor, depth: int = 3) -> st.SearchStrategy[dict[str, Any]]:
    """A dict of field name -> value (possibly partial) for a message of ``descriptor``."""
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for field in descriptor.fields:
        if field.type == FD.TYPE_MESSAGE:
            assert field.message_type is not None
            if depth <= 0 or field.message_type.GetOptions().map_entry:
                continue
            value: st.SearchStrategy[Any] = field_values(field.message_type, depth - 1)
        else:
            value = _scalar(field)
        if field.is_repeated:
            value = st.lists(value, max_size=4)
        parts[field.name] = value
    return st.fixed_dictionaries({}, optional=parts)


def build(message_class: type[Message], values: dict[str, Any]) -> Message:
    message = message_class()
    _fill(message, values)
    return message


def _fill(message: Message, values: dict[str, Any]) -> None:
    for name, value in values.items():
        field = message.DESCRIPTOR.fields_by_name[name]
        if field.type == FD.TYPE_MESSAGE:
            if field.is_repeated:
                for item in value:
                    _fill(getattr(message, name).add(), item)
            else:
                _fill(getattr(message, name), value)
                getattr(message, name).SetInParent()
        elif field.is_repeated:
            getattr(message, name).extend(value)
        else:
            setattr(message, name, value)


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def unknown_field(number: int, payload: bytes) -> bytes:
    """A length-delimited field the message does not declare."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def million_repeated(message_class: type[Message]) -> bytes:
    """The message with 10^6 elements in its first repeated scalar field, or, when it has none,
    10^6 occurrences of an undeclared varint field."""
    count = 10**6
    for field in message_class.DESCRIPTOR.fields:
        if field.is_repeated and field.type in (FD.TYPE_ENUM, FD.TYPE_INT32):
            packed = varint(1) * count
            return varint(field.number << 3 | 2) + varint(len(packed)) + packed
        if field.is_repeated and field.type == FD.TYPE_STRING:
            return (varint(field.number << 3 | 2) + varint(1) + b"x") * count
    return (varint(9_998 << 3 | 0) + varint(1)) * count


def string_fields(message_class: type[Message]) -> list[FieldDescriptor]:
    return [
        field
        for field in message_class.DESCRIPTOR.fields
        if field.type in (FD.TYPE_STRING, FD.TYPE_BYTES) and not field.is_repeated
    ]
