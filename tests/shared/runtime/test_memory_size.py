"""What a cached result holds is measured (shared.runtime.memory_size), not guessed from its
inputs or its serialized form."""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass
from types import MappingProxyType

from google.rpc import error_details_pb2

from shared.runtime.memory_size import held_bytes

MIB = 1024 * 1024


@dataclass(frozen=True)
class _Result:
    digest: str
    parts: MappingProxyType[str, object]


@dataclass(frozen=True, slots=True)
class _Slotted:
    payload: bytes


class _Kind(enum.Enum):
    ONE = "one"


def test_everything_a_result_reaches_is_counted_once() -> None:
    payload = b"p" * MIB
    result = _Result(
        "sha256:x", MappingProxyType({"a": payload, "b": [payload, _Slotted(payload)]})
    )
    measured = held_bytes(result)
    assert MIB < measured < MIB + 4096  # the shared megabyte once, plus the small objects
    assert held_bytes(_Slotted(b"q" * MIB)) > MIB
    # What every result shares (classes, enum members) is not counted.
    assert held_bytes([_Kind.ONE, _Result, None, True]) == sys.getsizeof([0, 0, 0, 0])


def test_a_protobuf_message_counts_the_fields_it_holds() -> None:
    info = error_details_pb2.ErrorInfo(reason="R", metadata={"k": "v" * MIB})
    assert held_bytes(info) > MIB
