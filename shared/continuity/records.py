"""Frozen dataclass records built in bulk.

A frozen dataclass's ``__init__`` sets every field through ``object.__setattr__`` (its own
``__setattr__`` refuses), one call per field: for an eight-field journal entry that is most of
its construction, and a snapshot builds one per entry of the journal at both ends (100,000 for a
long one), and the candidate one hold per unaccounted entry. :func:`direct_constructor` writes
the instance's ``__dict__`` in one step instead: the same instance (equal, same hash and repr,
still frozen), about half the cost.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
# The names the generated function uses besides its parameters (no field may shadow one).
_HELPERS = ("_records_new", "_records_set", "_records_cls", "instance")


def direct_constructor(cls: type[T]) -> Callable[..., T]:
    """A function taking ``cls``'s fields, positionally or by name and in declaration order, and
    returning the instance ``cls(...)`` would. Only for what it builds alike: a frozen dataclass
    whose fields are all set by ``__init__``, without ``__post_init__``, defaults or slots (it
    refuses anything else, so a class that grows one of them cannot silently diverge)."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"{cls.__name__} is not a frozen dataclass")
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
        raise TypeError(f"{cls.__name__} has __post_init__ or __slots__")
    names = []
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        missing = dataclasses.MISSING
        defaulted = field.default is not missing or field.default_factory is not missing
        if not field.init or defaulted:
            raise TypeError(f"{cls.__name__}.{field.name} is not a plain required field")
        names.append(field.name)
    if set(names) & set(_HELPERS):
        raise TypeError(f"{cls.__name__} has a field named like a helper of the constructor")
    # Generated as dataclasses generates __init__: one function with the fields as parameters.
    members = ", ".join(f"{name!r}: {name}" for name in names)
    source = (
        f"def build({', '.join(names)}):\n"
        f"    instance = _records_new(_records_cls)\n"
        f"    _records_set(instance, '__dict__', {{{members}}})\n"
        f"    return instance\n"
    )
    namespace: dict[str, Any] = {
        "_records_new": object.__new__,
        "_records_set": object.__setattr__,
        "_records_cls": cls,
    }
    exec(source, namespace)  # noqa: S102 - the source names only the dataclass's own fields
    build: Callable[..., T] = namespace["build"]
    build.__qualname__ = build.__name__ = f"build_{cls.__name__}"
    build.__doc__ = f"{cls.__name__}(...) without the frozen dataclass's per-field setattr."
    return build
