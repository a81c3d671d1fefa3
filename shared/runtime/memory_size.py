"""The memory an object graph holds, measured: what a cache of results counts against its bound.

``held_bytes`` walks everything reachable from a value through containers, mappings (read-only
ones too), dataclass and other instance attributes (``__dict__`` and ``__slots__``), and adds
``sys.getsizeof`` of each object reached, once. What is shared by every result (classes, modules,
functions, enum members, ``None`` and the booleans) is not walked. A protobuf message holds its
fields outside the Python object, so it is counted by its serialized size on top of the wrapper.

The walk is an estimate of what dropping the value frees: a string also held elsewhere is counted
here too (an over-estimate, the safe side for a bound), and allocator overhead is not counted.
Chosen over a ``tracemalloc`` measure of each computation, which traces every allocation of the
process while it runs and would count temporaries freed before the result is kept (ADR 0048).
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Mapping
from types import BuiltinFunctionType, FunctionType, MethodType, ModuleType

from google.protobuf.message import Message

_SHARED = (type, ModuleType, FunctionType, BuiltinFunctionType, MethodType, enum.Enum)
_LEAVES = (str, bytes, bytearray, int, float, complex, memoryview, range)


def held_bytes(value: object) -> int:
    """Bytes the objects reachable from ``value`` occupy (each counted once)."""
    seen: set[int] = set()
    total = 0
    pending: list[object] = [value]
    while pending:
        item = pending.pop()
        if item is None or item is True or item is False or isinstance(item, _SHARED):
            continue
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, Message):
            total += item.ByteSize()
        elif not isinstance(item, _LEAVES):
            total += _members(item, pending)
    return total


def _members(item: object, pending: list[object]) -> int:
    """Put what ``item`` refers to on ``pending``; the bytes of a hidden dictionary behind a
    read-only mapping."""
    hidden = 0
    if isinstance(item, Mapping):
        if not isinstance(item, dict):  # a read-only view: the dictionary behind it
            hidden = sys.getsizeof(dict(item))
        for key, member in item.items():
            pending.append(key)
            pending.append(member)
    elif isinstance(item, list | tuple | set | frozenset):
        pending.extend(item)
    attributes = getattr(item, "__dict__", None)
    if isinstance(attributes, dict):
        pending.append(attributes)
    for cls in type(item).__mro__:
        slots = getattr(cls, "__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(item, name):
                pending.append(getattr(item, name))
    return hidden
